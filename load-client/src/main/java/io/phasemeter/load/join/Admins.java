package io.phasemeter.load.join;

import java.net.URI;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where the proxies' admin listeners are: the URLs given one by one ({@code --admin}, repeatable)
 * and at most one name that resolves to every replica ({@code --admin-discover dns://NAME:PORT},
 * e.g. a Kubernetes headless Service). Both may be given together. Validated: a bad entry is one
 * line naming the flag.
 *
 * @param urls the admin URLs given, in order, without duplicates
 * @param discoverHost the name to resolve, or null
 * @param discoverPort the admin port of every address the name resolves to (0 without a name)
 */
public record Admins(List<URI> urls, String discoverHost, int discoverPort) {
  /** The scheme of {@code --admin-discover}. */
  public static final String DNS = "dns";

  private static final Pattern DNS_FORM =
      Pattern.compile("dns://([A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?):([0-9]{1,5})/?");

  public Admins {
    urls = List.copyOf(new LinkedHashSet<>(urls));
    if (discoverHost == null && discoverPort != 0) {
      throw new IllegalArgumentException("a discovery port needs a name");
    }
    if (discoverHost != null && (discoverPort < 1 || discoverPort > 65_535)) {
      throw new IllegalArgumentException(
          "--admin-discover: the port must be 1 to 65535, got " + discoverPort);
    }
    if (urls.isEmpty() && discoverHost == null) {
      throw new IllegalArgumentException("no admin URL and no name to discover");
    }
  }

  /** One admin URL (the single-proxy case). */
  public static Admins of(URI admin) {
    return new Admins(List.of(admin), null, 0);
  }

  /**
   * The admins of the command line; null when neither flag was given (no join).
   *
   * @param admins {@code --admin}'s values, each an http(s) URL
   * @param discover {@code --admin-discover}'s value, {@code dns://NAME:PORT}, or null
   */
  public static Admins parse(List<String> admins, String discover) {
    return parse("--admin", admins, "--admin-discover", discover);
  }

  /** As {@link #parse(List, String)}, naming the given keys in errors (a plan's, a flag). */
  public static Admins parse(String urlKey, List<String> admins, String discoverKey, String dns) {
    List<URI> urls = new ArrayList<>();
    String host = null;
    int port = 0;
    for (String a : admins == null ? List.<String>of() : admins) {
      if (a != null && a.trim().toLowerCase(Locale.ROOT).startsWith(DNS + ":")) {
        // A plan's list may hold the dns:// entry beside the URLs.
        if (host != null || dns != null) {
          throw new IllegalArgumentException(
              urlKey + ": at most one dns://NAME:PORT to discover, got a second: " + a);
        }
        Matcher m = dnsForm(urlKey, a);
        host = m.group(1);
        port = Integer.parseInt(m.group(3));
        continue;
      }
      urls.add(url(urlKey, a));
    }
    if (dns != null) {
      if (host != null) {
        throw new IllegalArgumentException(
            discoverKey + ": at most one dns://NAME:PORT to discover, got a second: " + dns);
      }
      Matcher m = dnsForm(discoverKey, dns);
      host = m.group(1);
      port = Integer.parseInt(m.group(3));
    }
    if (urls.isEmpty() && host == null) {
      return null;
    }
    return new Admins(urls, host, port);
  }

  private static Matcher dnsForm(String key, String value) {
    Matcher m = DNS_FORM.matcher(value.trim());
    int port = m.matches() ? Integer.parseInt(m.group(3)) : 0;
    if (!m.matches() || port < 1 || port > 65_535) {
      throw new IllegalArgumentException(
          key
              + " must be dns://NAME:PORT (a name every replica's admin address resolves from, e.g."
              + " dns://phasemeter-admin:9464), got '"
              + value
              + "'");
    }
    return m;
  }

  private static URI url(String key, String text) {
    URI u;
    try {
      u = URI.create(text == null ? "" : text.trim());
    } catch (IllegalArgumentException e) {
      u = null;
    }
    if (u == null
        || u.getScheme() == null
        || !(u.getScheme().equals("http") || u.getScheme().equals("https"))
        || u.getHost() == null) {
      throw new IllegalArgumentException(
          key + " must be an http URL, e.g. http://127.0.0.1:9464, got '" + text + "'");
    }
    return u;
  }

  /** Whether a name is resolved to find the replicas. */
  public boolean discovers() {
    return discoverHost != null;
  }

  /** {@code dns://NAME:PORT}, or null. */
  public String discoverText() {
    return discoverHost == null ? null : DNS + "://" + discoverHost + ":" + discoverPort;
  }

  /**
   * One admin URL to ask what the proxy says of itself ({@code /admin/stats}, {@code /metrics}):
   * the first given, else the discovered name's (any replica answers for the fleet's config).
   */
  public URI any() {
    return urls.isEmpty() ? URI.create("http://" + discoverHost + ":" + discoverPort) : urls.get(0);
  }

  /** The URLs and the name, as given, comma-separated: the conditions' {@code admin_url}. */
  public String describe() {
    List<String> all = new ArrayList<>();
    urls.forEach(u -> all.add(u.toString()));
    if (discoverHost != null) {
      all.add(discoverText());
    }
    return String.join(", ", all);
  }

  /** A replica's name in every output: {@code host:port} of its admin address. */
  public static String replicaName(URI admin) {
    int port =
        admin.getPort() > 0
            ? admin.getPort()
            : "https".equalsIgnoreCase(admin.getScheme()) ? 443 : 80;
    String host = admin.getHost();
    return (host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
  }
}
