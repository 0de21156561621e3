package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ListenAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class HttpEndpointTest
{
    private static final RequestHandler NOTHING = request -> HttpResponseData.json(200, "{}");

    @Test
    void shouldRefuseToDeleteARegularFileAtTheSocketPath(@TempDir final Path dir) throws Exception
    {
        final Path file = Files.writeString(dir.resolve("api.sock"), "not a socket");
        assertThatThrownBy(() -> HttpEndpoint.start("api", ListenAddress.parse("unix:" + file), NOTHING))
            .isInstanceOf(UncheckedIOException.class)
            .hasMessageContaining("appliance.api.listen: cannot listen on unix:" + file)
            .hasMessageContaining("exists and is not a socket; refusing to delete it");
        assertThat(Files.readString(file)).isEqualTo("not a socket");
    }

    @Test
    void shouldNameTheMissingDirectoryOfASocket(@TempDir final Path dir)
    {
        final Path socket = dir.resolve("missing/api.sock");
        assertThatThrownBy(() -> HttpEndpoint.start("api", ListenAddress.parse("unix:" + socket), NOTHING))
            .isInstanceOf(UncheckedIOException.class)
            .hasMessageContaining("directory " + socket.getParent() + " does not exist");
    }

    @Test
    void shouldReplaceAStaleSocketAndNameTheSettingWhenThePortIsTaken(@TempDir final Path dir) throws Exception
    {
        final ListenAddress unix = ListenAddress.parse("unix:" + dir.resolve("api.sock"));
        HttpEndpoint.start("api", unix, NOTHING).close();
        HttpEndpoint.start("api", unix, NOTHING).close();

        try (HttpEndpoint first = HttpEndpoint.start("metrics", ListenAddress.parse("127.0.0.1:0"), NOTHING))
        {
            final ListenAddress taken = first.boundAddress();
            assertThatThrownBy(() -> HttpEndpoint.start("metrics", taken, NOTHING))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("appliance.metrics.listen: cannot listen on " + taken);
        }
    }
}
