package io.netreduce.controlplane.config;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code --check}'s look at a Unix socket path (appliance.api.listen, appliance.metrics.listen): what the daemon's
 * start would refuse is refused here, what it would accept passes.
 */
class ListenCheckTest
{
    private static String problem(final Path socket)
    {
        return ListenCheck.problem(ListenAddress.parse("unix:" + socket));
    }

    @Test
    void shouldPassAFreePathAndAStaleSocketAndLeaveNothingBehind(@TempDir final Path dir) throws Exception
    {
        assertThat(problem(dir.resolve("api.sock"))).isNull();
        final Path stale = dir.resolve("stale.sock");
        try (ServerSocketChannel channel = ServerSocketChannel.open(StandardProtocolFamily.UNIX))
        {
            channel.bind(UnixDomainSocketAddress.of(stale));
        }
        assertThat(stale).exists();
        assertThat(problem(stale)).as("a previous run's socket: start replaces it").isNull();
        try (var listing = Files.list(dir))
        {
            assertThat(listing.map(p -> p.getFileName().toString())).as("the probe is removed")
                .containsExactly("stale.sock");
        }
    }

    @Test
    void shouldRefuseAPathLongerThanASocketAddressHolds(@TempDir final Path dir)
    {
        final Path fits = dir.resolve("s".repeat(ListenCheck.MAX_UNIX_PATH_BYTES - dir.toString().length() - 1));
        assertThat(fits.toString()).hasSize(ListenCheck.MAX_UNIX_PATH_BYTES);
        assertThat(problem(fits)).isNull();
        final Path tooLong = dir.resolve(fits.getFileName() + "s");
        assertThat(problem(tooLong)).isEqualTo("the path is " + (ListenCheck.MAX_UNIX_PATH_BYTES + 1) +
            " bytes; a Unix socket's path holds at most " + ListenCheck.MAX_UNIX_PATH_BYTES);
    }

    @Test
    void shouldRefuseAFileOrDirectoryAtThePathWhichStartWouldNotDelete(@TempDir final Path dir) throws Exception
    {
        final Path file = Files.writeString(dir.resolve("api.sock"), "not a socket");
        assertThat(problem(file)).isEqualTo(file + " exists and is not a socket (the daemon deletes only a stale " +
            "socket there)");
        final Path directory = Files.createDirectory(dir.resolve("d.sock"));
        assertThat(problem(directory)).contains("exists and is not a socket");
        assertThat(Files.readString(file)).isEqualTo("not a socket");
    }

    @Test
    void shouldRefuseADirectoryThatTakesNoSocketAndLeaveAMissingOneToTheStart(@TempDir final Path dir)
    {
        assertThat(problem(Path.of("/proc/self/x.sock"))).startsWith("cannot create a socket in /proc/self");
        assertThat(problem(dir.resolve("missing/api.sock"))).as("the unit's RuntimeDirectory does not exist yet")
            .isNull();
    }
}
