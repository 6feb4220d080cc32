package io.phasemeter.proxy.pipeline;

/** How a request ended ({@code llm.outcome}); a stable contract. */
public enum Outcome {
  SUCCESS("success"),
  CLIENT_ERROR("client_error"),
  UPSTREAM_ERROR("upstream_error"),
  REJECTED("rejected"),
  CANCELLED("cancelled"),
  TIMEOUT("timeout");

  private final String label;

  Outcome(String label) {
    this.label = label;
  }

  /** The attribute and label value. */
  public String label() {
    return label;
  }
}
