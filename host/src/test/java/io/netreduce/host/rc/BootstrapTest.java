package io.netreduce.host.rc;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class BootstrapTest
{
    private static final ConnectionInfo SERVER = new ConnectionInfo(0x11, 0xABCDEF,
        RcPair.ip("10.1.0.1"), 0x0200_0000_0001L, 0x7E00_0000_0000L, 0x0101, 4096);
    private static final ConnectionInfo CLIENT = new ConnectionInfo(0x12, 0x000001,
        RcPair.ip("fd00::2"), 0x0200_0000_0002L, 0x7E00_0000_2000L, 0xFFFF_FFFE, 1L << 30);

    @Test
    void shouldRoundTripConnectionInfoThroughItsTextLine()
    {
        assertThat(ConnectionInfo.parse(SERVER.toLine())).isEqualTo(SERVER);
        assertThat(ConnectionInfo.parse(CLIENT.toLine())).isEqualTo(CLIENT);
        assertThat(SERVER.toLine()).contains("qpn=0x000011", "mac=02:00:00:00:00:01", "ip=10.1.0.1");
    }

    @Test
    void shouldRejectConnectionInfoWithMissingField()
    {
        assertThatThrownBy(() -> ConnectionInfo.parse("qpn=0x11 psn=0x1")).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("ip");
    }

    @Test
    void shouldExchangeParametersOverTcp() throws Exception
    {
        final int port;
        try (ServerSocket probe = new ServerSocket(0))
        {
            port = probe.getLocalPort();
        }
        final CompletableFuture<ConnectionInfo> serverSide = CompletableFuture.supplyAsync(() ->
        {
            try (Bootstrap server = Bootstrap.listen(port, Duration.ofSeconds(10)))
            {
                final ConnectionInfo peer = server.exchange(SERVER);
                server.sendLine("result ok");
                return peer;
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        });
        try (Bootstrap client = Bootstrap.connect(InetAddress.getLoopbackAddress().getHostAddress(), port,
            Duration.ofSeconds(10)))
        {
            assertThat(client.exchange(CLIENT)).isEqualTo(SERVER);
            assertThat(client.readLine()).isEqualTo("result ok");
        }
        assertThat(serverSide.get()).isEqualTo(CLIENT);
    }

    @Test
    void shouldExchangeParametersViaFiles(@TempDir final Path dir) throws Exception
    {
        final CompletableFuture<ConnectionInfo> other = CompletableFuture.supplyAsync(() ->
        {
            try
            {
                return Bootstrap.exchangeViaFiles(CLIENT, dir.resolve("b"), dir.resolve("a"), Duration.ofSeconds(5));
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        });
        assertThat(Bootstrap.exchangeViaFiles(SERVER, dir.resolve("a"), dir.resolve("b"), Duration.ofSeconds(5)))
            .isEqualTo(CLIENT);
        assertThat(other.get()).isEqualTo(SERVER);
    }
}
