package io.phasemeter.proxy;

public final class ProxyMain {
  public static void main(String[] args) {}
}
