package io.phasemeter.load;

/** Entry point (placeholder until the CLI lands). */
public final class LoadMain {
  private LoadMain() {}

  public static void main(String[] args) {
    System.err.println("phasemeter load: not wired yet");
    System.exit(2);
  }
}
