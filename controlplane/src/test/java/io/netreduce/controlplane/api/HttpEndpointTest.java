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
    void shouldCreateTheSocketReadableAndWritableOnlyByItsOwner(@TempDir final Path dir) throws Exception
    {
        final Path socket = dir.resolve("api.sock");
        try (HttpEndpoint ignored = HttpEndpoint.start("api", ListenAddress.parse("unix:" + socket), NOTHING))
        {
            assertThat(java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(socket)))
                .isEqualTo("rw-------");
        }
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

    private static final String TOKEN = "0123456789abcdef0123456789abcdef";

    private static String raw(final ListenAddress address, final String requests) throws Exception
    {
        try (java.net.Socket socket = new java.net.Socket(address.host(), address.port()))
        {
            socket.setSoTimeout(5_000);
            socket.getOutputStream().write(requests.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            return new String(socket.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        }
    }

    /**
     * {@link #raw}, or "" when the endpoint closes or resets the connection without answering (over its cap).
     */
    private static String answerOrClosed(final ListenAddress address, final String requests) throws Exception
    {
        try
        {
            return raw(address, requests);
        }
        catch (final java.net.SocketException reset)
        {
            return "";
        }
    }

    private static int count(final String text, final String what)
    {
        int n = 0;
        for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1))
        {
            n++;
        }
        return n;
    }

    @Test
    void shouldAdmitOnlyTheTokenHolderAndNoWebPageOnTcp() throws Exception
    {
        final ListenAddress any = ListenAddress.parse("127.0.0.1:0");
        final AccessPolicy policy = new AccessPolicy(any, TOKEN, path -> path.equals("/v1/health"));
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", any, NOTHING, policy))
        {
            final ListenAddress at = endpoint.boundAddress();
            final String host = "Host: " + at + "\r\n";
            assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n"))
                .as("no token").startsWith("HTTP/1.1 401");
            assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\n" + host + "Authorization: Bearer wrong\r\n" +
                "Connection: close\r\n\r\n")).as("wrong token").startsWith("HTTP/1.1 401");
            assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\n" + host + "Authorization: Bearer " + TOKEN + "\r\n" +
                "Connection: close\r\n\r\n")).as("the token").startsWith("HTTP/1.1 200");
            assertThat(raw(at, "GET /v1/health HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n"))
                .as("open read").startsWith("HTTP/1.1 200");
            assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\n" + host + "Authorization: Bearer " + TOKEN + "\r\n" +
                "Origin: http://evil.example\r\nConnection: close\r\n\r\n")).as("a web page")
                .startsWith("HTTP/1.1 403");
            assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\nHost: evil.example:" + at.port() + "\r\n" +
                "Authorization: Bearer " + TOKEN + "\r\nConnection: close\r\n\r\n")).as("DNS rebinding")
                .startsWith("HTTP/1.1 403");
            final String yaml = "name: x";
            assertThat(raw(at, "POST /v1/jobs HTTP/1.1\r\n" + host + "Authorization: Bearer " + TOKEN + "\r\n" +
                "Content-Type: text/plain\r\nContent-Length: " + yaml.length() + "\r\nConnection: close\r\n\r\n" +
                yaml)).as("a body a form could send").startsWith("HTTP/1.1 415");
        }
    }

    @Test
    void shouldAnswerEveryPipelinedRequest() throws Exception
    {
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), NOTHING))
        {
            final ListenAddress at = endpoint.boundAddress();
            final StringBuilder requests = new StringBuilder();
            // Netty's codec lets 128 requests be in flight on one connection; 120 is well past the 4 KiB that
            // used to get only the first one answered.
            for (int i = 0; i < 119; i++)
            {
                requests.append("GET /v1/health HTTP/1.1\r\nHost: ").append(at).append("\r\n\r\n");
            }
            requests.append("GET /v1/health HTTP/1.1\r\nHost: ").append(at).append("\r\nConnection: close\r\n\r\n");
            assertThat(requests.length()).as("well over 4 KiB").isGreaterThan(5_000);
            final String answers = raw(at, requests.toString());
            assertThat(count(answers, "HTTP/1.1 200")).as(answers.substring(Math.max(0, answers.length() - 400)))
                .isEqualTo(120);
        }
    }

    @Test
    void shouldRefuseConnectionsOverTheCap() throws Exception
    {
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), NOTHING))
        {
            final ListenAddress at = endpoint.boundAddress();
            final java.util.List<java.net.Socket> open = new java.util.ArrayList<>();
            try
            {
                for (int i = 0; i < HttpEndpoint.MAX_CONNECTIONS; i++)
                {
                    final java.net.Socket socket = new java.net.Socket(at.host(), at.port());
                    socket.getOutputStream().write("GET /v1/hea".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    open.add(socket);
                }
                // The cap is counted as connections are set up: wait until the server has seen them all.
                final long deadline = System.nanoTime() + 5_000_000_000L;
                String answer;
                do
                {
                    answer = answerOrClosed(at, "GET /v1/health HTTP/1.1\r\nHost: " + at +
                        "\r\nConnection: close\r\n\r\n");
                }
                while (answer.startsWith("HTTP/1.1 200") && System.nanoTime() < deadline);
                assertThat(answer).as("connection over the cap closed unanswered").isEmpty();
            }
            finally
            {
                for (final java.net.Socket socket : open)
                {
                    socket.close();
                }
            }
            // With the half-sent requests gone, the endpoint answers again: once it has seen them close, which it
            // learns asynchronously (a connection tried before that is still over the cap and closed unanswered).
            final long deadline = System.nanoTime() + 5_000_000_000L;
            String again;
            do
            {
                again = answerOrClosed(at, "GET /v1/health HTTP/1.1\r\nHost: " + at + "\r\nConnection: close\r\n\r\n");
            }
            while (!again.startsWith("HTTP/1.1 200") && System.nanoTime() < deadline);
            assertThat(again).startsWith("HTTP/1.1 200");
        }
    }
}
