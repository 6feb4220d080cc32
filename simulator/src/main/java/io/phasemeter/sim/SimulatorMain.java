package io.phasemeter.sim;

public final class SimulatorMain {
  public static void main(String[] args) {}
}
