package io.phasemeter.load.http;

/** How a request ended, from the client's side; everything but {@link #NONE} is a failure. */
public enum ErrorClass {
  /** A complete, valid response. */
  NONE,
  /** The response was complete but wrong (usage differs from what was asked), see its reason. */
  INVALID,
  /** HTTP 4xx. */
  HTTP_4XX,
  /** HTTP 5xx. */
  HTTP_5XX,
  /** Could not connect. */
  CONNECT,
  /** The client's own timeout. */
  TIMEOUT,
  /** The connection closed before the response ended. */
  RESET,
  /** The stream ended with an error event or without [DONE]. */
  STREAM_ERROR;

  /** Whether this counts as a failed request. */
  public boolean failed() {
    return this != NONE;
  }
}
