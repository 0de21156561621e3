package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ListenAddress;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Locale;
import java.util.function.Predicate;

/**
 * Who may use the control API, checked on every request before it is handled.
 * <ul>
 *   <li>No web page: a request with an {@code Origin} header (browsers send one on cross-site and on scripted
 *       requests) is refused, and on TCP the {@code Host} must be a loopback name or the listen address, which
 *       defeats DNS rebinding (a page on evil.example whose name now resolves to 127.0.0.1 still says
 *       {@code Host: evil.example}).</li>
 *   <li>Bodies must say they are JSON or YAML: a form or {@code text/plain} POST, which a page can send without a
 *       CORS preflight, is refused.</li>
 *   <li>On TCP, a bearer token (from a file only the daemon's user can read; {@code ctl} reads the same file):
 *       any local user can open a TCP port. A Unix socket is guarded by its file mode instead.</li>
 * </ul>
 * Open reads ({@code openRead}) need no token: what a ring's members must check before they send.
 */
public final class AccessPolicy
{
    private final byte[] token;
    private final ListenAddress address;
    private final Predicate<String> openRead;

    /**
     * @param address  the address the API listens on.
     * @param token    the bearer token required on TCP, or null (Unix socket).
     * @param openRead paths a GET may read without the token.
     */
    public AccessPolicy(final ListenAddress address, final String token, final Predicate<String> openRead)
    {
        this.address = address;
        this.token = token == null ? null : token.getBytes(StandardCharsets.US_ASCII);
        this.openRead = openRead;
    }

    /**
     * @return the refusal to answer, or null when the request may be handled.
     */
    HttpResponseData check(final String method, final String path, final String host, final String origin,
        final String authorization, final String contentType, final int bodyLength)
    {
        if (origin != null)
        {
            return refuse(403, "requests from web pages are refused (Origin: " + origin + ")");
        }
        if (!address.isUnix() && !isAllowedHost(host))
        {
            return refuse(403, "Host '" + host + "' is not this API's address (use 127.0.0.1, localhost or " +
                address + ")");
        }
        if (bodyLength > 0 && !isJsonOrYaml(contentType))
        {
            return refuse(415, "a request body must be application/json or application/yaml, not " + contentType);
        }
        if (token != null && !("GET".equals(method) && openRead.test(path)) && !hasToken(authorization))
        {
            return new HttpResponseData(401, "application/json", json("this API needs its token: " +
                "'Authorization: Bearer <token>' from the file in appliance.api.tokenFile (netreduce ctl " +
                "--token-file FILE reads it)").getBytes(StandardCharsets.UTF_8),
                java.util.Map.of("WWW-Authenticate", "Bearer"));
        }
        return null;
    }

    /**
     * @return whether a request with this {@code Authorization} header comes from the token's holder: its connection
     *         then keeps its slot against strangers' (on a Unix socket every connection does).
     */
    boolean isOwner(final String authorization)
    {
        return token != null && hasToken(authorization);
    }

    private boolean hasToken(final String authorization)
    {
        if (authorization == null || !authorization.regionMatches(true, 0, "Bearer ", 0, 7))
        {
            return false;
        }
        return MessageDigest.isEqual(token, authorization.substring(7).trim().getBytes(StandardCharsets.US_ASCII));
    }

    private boolean isAllowedHost(final String host)
    {
        if (host == null)
        {
            return false;
        }
        final String name = stripPort(host.toLowerCase(Locale.ROOT));
        return "localhost".equals(name) || "127.0.0.1".equals(name) || "[::1]".equals(name) || "::1".equals(name) ||
            name.equals(address.host().toLowerCase(Locale.ROOT)) ||
            ("[" + address.host().toLowerCase(Locale.ROOT) + "]").equals(name);
    }

    private static String stripPort(final String host)
    {
        if (host.startsWith("["))
        {
            final int end = host.indexOf(']');
            return end < 0 ? host : host.substring(0, end + 1);
        }
        final int colon = host.indexOf(':');
        return colon < 0 || host.indexOf(':', colon + 1) >= 0 ? host : host.substring(0, colon);
    }

    private static boolean isJsonOrYaml(final String contentType)
    {
        if (contentType == null)
        {
            return false;
        }
        final String type = contentType.split(";", 2)[0].trim().toLowerCase(Locale.ROOT);
        return type.equals("application/json") || type.equals("application/yaml") ||
            type.equals("application/x-yaml") || type.equals("text/yaml");
    }

    private static HttpResponseData refuse(final int status, final String message)
    {
        return HttpResponseData.json(status, json(message));
    }

    private static String json(final String message)
    {
        return "{\"error\":\"" + message.replace("\\", "\\\\").replace("\"", "'") + "\"}";
    }
}
