package io.netreduce.controlplane.config;

import java.io.IOException;
import java.net.BindException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * What binding a listen address would find, tried before the daemon starts ({@code --check} and the start's own
 * validation): a Unix socket's path must fit a socket address and its directory must take a new socket (a socket is
 * bound there under a name of its own and removed); a TCP address must be one of this host's and its port one the
 * daemon may bind (it is bound and released). An address in use is not a fault of the configuration (the running
 * daemon holds it during a reload's validation, an old one may be exiting): the start itself reports it.
 */
public final class ListenCheck
{
    /** Bytes of a Unix socket path, without its terminating NUL (sun_path is 108 bytes on Linux). */
    public static final int MAX_UNIX_PATH_BYTES = 107;

    private ListenCheck()
    {
    }

    /**
     * @return why the daemon could not listen on {@code address}, or null when it could (or the address is merely in
     *         use now).
     */
    public static String problem(final ListenAddress address)
    {
        return address.isUnix() ? unixProblem(address.unixPath().toAbsolutePath()) : tcpProblem(address);
    }

    /**
     * @return whether a bind failed only because the address is in use.
     */
    public static boolean inUse(final Throwable failure)
    {
        return failure instanceof BindException && failure.getMessage() != null &&
            failure.getMessage().contains("in use");
    }

    private static String unixProblem(final Path socket)
    {
        final int bytes = socket.toString().getBytes(StandardCharsets.UTF_8).length;
        if (bytes > MAX_UNIX_PATH_BYTES)
        {
            return "the path is " + bytes + " bytes; a Unix socket's path holds at most " + MAX_UNIX_PATH_BYTES;
        }
        if (Files.exists(socket, LinkOption.NOFOLLOW_LINKS) && !isSocket(socket))
        {
            // The daemon replaces a stale socket but deletes nothing else: start would refuse it.
            return socket + " exists and is not a socket (the daemon deletes only a stale socket there)";
        }
        final Path dir = socket.getParent();
        if (dir == null || !Files.isDirectory(dir))
        {
            // A missing directory is left to the start, which names it: under the systemd unit it is the
            // RuntimeDirectory, made just before the daemon starts, so a check run by hand before may not find it.
            return null;
        }
        final Path probe = dir.resolve(".nrchk" + Long.toString(ProcessHandle.current().pid(), 36));
        if (probe.toString().getBytes(StandardCharsets.UTF_8).length > MAX_UNIX_PATH_BYTES)
        {
            return null;
        }
        try (ServerSocketChannel channel = ServerSocketChannel.open(StandardProtocolFamily.UNIX))
        {
            Files.deleteIfExists(probe);
            channel.bind(UnixDomainSocketAddress.of(probe));
            return null;
        }
        catch (final IOException | RuntimeException ex)
        {
            return "cannot create a socket in " + dir + ": " + reason(ex);
        }
        finally
        {
            try
            {
                Files.deleteIfExists(probe);
            }
            catch (final IOException ignored)
            {
                // nothing was created, or it is not ours to worry about: the bind above is what counts
            }
        }
    }

    private static boolean isSocket(final Path path)
    {
        try
        {
            final int mode = (Integer)Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
            return (mode & 0170000) == 0140000;
        }
        catch (final IOException | RuntimeException ex)
        {
            return false;
        }
    }

    private static String tcpProblem(final ListenAddress address)
    {
        try (ServerSocketChannel channel = ServerSocketChannel.open())
        {
            channel.bind(address.toSocketAddress());
            return null;
        }
        catch (final IOException | RuntimeException ex)
        {
            if (inUse(ex))
            {
                return null;
            }
            final String message = String.valueOf(ex.getMessage());
            if (message.contains("assign requested address"))
            {
                return "cannot listen on " + address + ": no interface of this host has that address";
            }
            if (message.contains("ermission denied") && address.port() > 0 && address.port() < 1024)
            {
                return "cannot listen on " + address + ": port " + address.port() + " needs CAP_NET_BIND_SERVICE " +
                    "(or a port from 1024)";
            }
            return "cannot listen on " + address + ": " + reason(ex);
        }
    }

    private static String reason(final Exception ex)
    {
        return ex.getMessage() != null ? ex.getMessage() : ex.getClass().getSimpleName();
    }
}
