package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnixDomainSocketAddress;
import java.nio.file.Path;

/**
 * Where a server listens (or a client connects): {@code host:port}, {@code [v6]:port} or {@code unix:/absolute/path}.
 * The host is an IP literal or {@code localhost}; port 0 asks the kernel for a free port (used by tests).
 *
 * @param host     the IP literal or {@code localhost}; null for a Unix socket.
 * @param port     the TCP port; -1 for a Unix socket.
 * @param unixPath the socket path; null for TCP.
 */
public record ListenAddress(String host, int port, Path unixPath)
{
    private static final String UNIX_PREFIX = "unix:";

    /**
     * @param text the address text.
     * @return the parsed address.
     * @throws IllegalArgumentException with an operator-facing reason if the text is not an address.
     */
    public static ListenAddress parse(final String text)
    {
        if (text == null || text.isBlank())
        {
            throw new IllegalArgumentException("empty address");
        }
        if (text.startsWith(UNIX_PREFIX))
        {
            final String path = text.substring(UNIX_PREFIX.length());
            if (!path.startsWith("/"))
            {
                throw new IllegalArgumentException("unix socket path must be absolute, e.g. unix:/run/netreduce/api.sock");
            }
            return new ListenAddress(null, -1, Path.of(path));
        }
        final int colon = text.lastIndexOf(':');
        if (colon <= 0)
        {
            throw new IllegalArgumentException("expected host:port, [ipv6]:port or unix:/path");
        }
        String host = text.substring(0, colon);
        final String portText = text.substring(colon + 1);
        if (host.startsWith("["))
        {
            if (!host.endsWith("]"))
            {
                throw new IllegalArgumentException("unterminated [ in IPv6 address");
            }
            host = host.substring(1, host.length() - 1);
        }
        else if (host.indexOf(':') >= 0)
        {
            throw new IllegalArgumentException("IPv6 addresses need brackets, e.g. [::1]:9740");
        }
        if (!"localhost".equals(host) && Addresses.parseIpLiteral(host) == null)
        {
            throw new IllegalArgumentException("host '" + host + "' is not an IP address or localhost");
        }
        final int port;
        try
        {
            port = Integer.parseInt(portText);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("port '" + portText + "' is not a number");
        }
        if (port < 0 || port > 65535)
        {
            throw new IllegalArgumentException("port " + port + " is not in 0..65535");
        }
        return new ListenAddress(host, port, null);
    }

    /**
     * @return true for a Unix domain socket address.
     */
    public boolean isUnix()
    {
        return unixPath != null;
    }

    /**
     * @return the socket address to bind or connect to (no DNS: localhost maps to the loopback address).
     */
    public SocketAddress toSocketAddress()
    {
        if (isUnix())
        {
            return UnixDomainSocketAddress.of(unixPath);
        }
        final InetAddress address = "localhost".equals(host) ?
            InetAddress.getLoopbackAddress() : Addresses.parseIpLiteral(host);
        return new InetSocketAddress(address, port);
    }

    /**
     * @return the address in the form {@link #parse} accepts.
     */
    @JsonValue
    @Override
    public String toString()
    {
        if (isUnix())
        {
            return UNIX_PREFIX + unixPath;
        }
        return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
    }
}
