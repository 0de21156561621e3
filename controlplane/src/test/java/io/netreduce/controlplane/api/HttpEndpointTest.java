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

    private static java.net.Socket halfSent(final ListenAddress at) throws Exception
    {
        final java.net.Socket socket = new java.net.Socket(at.host(), at.port());
        socket.getOutputStream().write("GET /v1/hea".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        return socket;
    }

    /**
     * @return whether the server closed the socket (read sees end of stream or a reset) within {@code millis}.
     */
    private static boolean closedWithin(final java.net.Socket socket, final long millis) throws Exception
    {
        socket.setSoTimeout((int)millis);
        try
        {
            return socket.getInputStream().read() < 0;
        }
        catch (final java.net.SocketTimeoutException stillOpen)
        {
            return false;
        }
        catch (final java.net.SocketException reset)
        {
            return true;
        }
    }

    @Test
    void shouldCloseARequestTrickledAByteAtATimeAtItsDeadline() throws Exception
    {
        // The idle timeout restarted on every byte: one header byte every 5 s kept a connection (and its slot)
        // for as long as the sender liked. A request now has a deadline of its own from the connection's start.
        final HttpEndpoint.Limits limits = HttpEndpoint.Limits.DEFAULT.withRequestDeadlineMillis(1_000);
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), NOTHING, null,
            limits))
        {
            final ListenAddress at = endpoint.boundAddress();
            try (java.net.Socket socket = new java.net.Socket(at.host(), at.port()))
            {
                final byte[] head = ("GET /v1/health HTTP/1.1\r\nHost: " + at + "\r\nX-Trickle: " + "x".repeat(200))
                    .getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                final long start = System.nanoTime();
                boolean closed = false;
                for (int i = 0; i < head.length && !closed; i++)
                {
                    try
                    {
                        socket.getOutputStream().write(head[i]);
                        socket.getOutputStream().flush();
                    }
                    catch (final java.io.IOException reset)
                    {
                        closed = true;
                        break;
                    }
                    closed = closedWithin(socket, 100);
                }
                final long millis = (System.nanoTime() - start) / 1_000_000;
                assertThat(closed).as("closed while still trickling").isTrue();
                assertThat(millis).as("at the deadline, not later").isBetween(900L, 3_000L);
            }
        }
    }

    @Test
    void shouldCloseAnIdleConnectionAtTheDeadlineAfterItsLastAnswer() throws Exception
    {
        final HttpEndpoint.Limits limits = HttpEndpoint.Limits.DEFAULT.withRequestDeadlineMillis(500);
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), NOTHING, null,
            limits))
        {
            final ListenAddress at = endpoint.boundAddress();
            try (java.net.Socket socket = new java.net.Socket(at.host(), at.port()))
            {
                for (int i = 0; i < 3; i++)
                {
                    // Each answer gives the connection a new deadline for its next request.
                    Thread.sleep(300);
                    socket.getOutputStream().write(("GET /v1/health HTTP/1.1\r\nHost: " + at + "\r\n\r\n")
                        .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    final byte[] answer = new byte[12];
                    assertThat(socket.getInputStream().readNBytes(answer, 0, 12)).isEqualTo(12);
                    assertThat(new String(answer, java.nio.charset.StandardCharsets.US_ASCII)).isEqualTo("HTTP/1.1 200");
                    socket.getInputStream().skip(socket.getInputStream().available());
                }
                assertThat(closedWithin(socket, 3_000)).as("idle past the deadline").isTrue();
            }
        }
    }

    @Test
    void shouldAnswerTheOwnerWhileStrangersHoldEveryConnection() throws Exception
    {
        // 64 connections with half-sent requests (and more arriving) used to leave the owner's request closed
        // unanswered. A new connection now closes the oldest one that has not shown the token, and one that has is
        // never closed for another.
        final ListenAddress any = ListenAddress.parse("127.0.0.1:0");
        final AccessPolicy policy = new AccessPolicy(any, TOKEN, path -> path.equals("/v1/health"));
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", any, NOTHING, policy))
        {
            final ListenAddress at = endpoint.boundAddress();
            final java.util.List<java.net.Socket> strangers = new java.util.ArrayList<>();
            try (java.net.Socket owner = new java.net.Socket(at.host(), at.port()))
            {
                // The owner's long-lived connection: once it has shown the token, it keeps its slot.
                owner.getOutputStream().write(("GET /v1/jobs HTTP/1.1\r\nHost: " + at + "\r\nAuthorization: " +
                    "Bearer " + TOKEN + "\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                final byte[] first = new byte[12];
                assertThat(owner.getInputStream().readNBytes(first, 0, 12)).isEqualTo(12);
                owner.getInputStream().skip(owner.getInputStream().available());
                for (int i = 0; i < 2 * HttpEndpoint.Limits.DEFAULT.maxConnections(); i++)
                {
                    strangers.add(halfSent(at));
                }
                // Strangers' connections beyond the cap closed the oldest strangers' ones, never the owner's.
                Thread.sleep(200);
                owner.getOutputStream().write(("GET /v1/jobs HTTP/1.1\r\nHost: " + at + "\r\nAuthorization: " +
                    "Bearer " + TOKEN + "\r\nConnection: close\r\n\r\n")
                    .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                owner.setSoTimeout(5_000);
                assertThat(new String(owner.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8))
                    .as("the owner's connection kept its slot").startsWith("HTTP/1.1 200");
                // A new connection of the owner's gets in too, answered at once.
                assertThat(raw(at, "GET /v1/jobs HTTP/1.1\r\nHost: " + at + "\r\nAuthorization: Bearer " + TOKEN +
                    "\r\nConnection: close\r\n\r\n")).as("a new connection of the owner's").startsWith("HTTP/1.1 200");
                int open = 0;
                for (final java.net.Socket stranger : strangers)
                {
                    open += closedWithin(stranger, 20) ? 0 : 1;
                }
                assertThat(open).as("strangers' connections left open").isLessThan(
                    HttpEndpoint.Limits.DEFAULT.maxConnections());
            }
            finally
            {
                for (final java.net.Socket socket : strangers)
                {
                    socket.close();
                }
            }
        }
    }

    @Test
    void shouldKeepOnePeersConnectionsToItsOwnShare() throws Exception
    {
        // One peer's half-sent connections beyond its share close that peer's oldest ones, not another's.
        final HttpEndpoint.Limits limits = HttpEndpoint.Limits.DEFAULT;
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("0.0.0.0:0"), NOTHING, null, limits))
        {
            final ListenAddress at = endpoint.boundAddress();
            final java.net.InetAddress other = java.net.InetAddress.getByName("127.0.0.2");
            final java.net.Socket fromOther = new java.net.Socket();
            fromOther.bind(new java.net.InetSocketAddress(other, 0));
            fromOther.connect(new java.net.InetSocketAddress("127.0.0.1", at.port()));
            fromOther.getOutputStream().write("GET /v1/hea".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            final java.util.List<java.net.Socket> flood = new java.util.ArrayList<>();
            try
            {
                final ListenAddress loopback = new ListenAddress("127.0.0.1", at.port(), null);
                for (int i = 0; i < limits.maxConnections(); i++)
                {
                    flood.add(halfSent(loopback));
                }
                Thread.sleep(200);
                assertThat(closedWithin(fromOther, 50)).as("another peer's connection").isFalse();
                int open = 0;
                for (final java.net.Socket socket : flood)
                {
                    open += closedWithin(socket, 20) ? 0 : 1;
                }
                assertThat(open).as("one peer's connections").isEqualTo(limits.maxConnectionsPerPeer());
            }
            finally
            {
                fromOther.close();
                for (final java.net.Socket socket : flood)
                {
                    socket.close();
                }
            }
        }
    }

    @Test
    void shouldCloseConnectionsOverTheCapWhenEveryOneIsTheOwners(@TempDir final Path dir) throws Exception
    {
        // On a Unix socket every connection is the owner's (the socket is 0600): none is closed for another, so a
        // connection over the cap is closed unanswered.
        final ListenAddress unix = ListenAddress.parse("unix:" + dir.resolve("api.sock"));
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", unix, NOTHING, new AccessPolicy(unix, null, p -> true)))
        {
            final java.util.List<java.nio.channels.SocketChannel> open = new java.util.ArrayList<>();
            try
            {
                for (int i = 0; i < HttpEndpoint.Limits.DEFAULT.maxConnections(); i++)
                {
                    final java.nio.channels.SocketChannel channel = java.nio.channels.SocketChannel.open(
                        unix.toSocketAddress());
                    channel.write(java.nio.ByteBuffer.wrap("GET /v1/hea".getBytes(
                        java.nio.charset.StandardCharsets.US_ASCII)));
                    open.add(channel);
                }
                Thread.sleep(200);
                try (java.nio.channels.SocketChannel over = java.nio.channels.SocketChannel.open(unix.toSocketAddress()))
                {
                    final java.nio.ByteBuffer answer = java.nio.ByteBuffer.allocate(64);
                    int read;
                    try
                    {
                        // The endpoint may close the connection before the request is written: a broken pipe on
                        // the write is the same answer as end-of-stream on the read.
                        over.write(java.nio.ByteBuffer.wrap("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(
                            java.nio.charset.StandardCharsets.US_ASCII)));
                        read = over.read(answer);
                    }
                    catch (final java.io.IOException reset)
                    {
                        read = -1;
                    }
                    assertThat(read).as("closed unanswered").isEqualTo(-1);
                }
            }
            finally
            {
                for (final java.nio.channels.SocketChannel channel : open)
                {
                    channel.close();
                }
            }
        }
    }

    @Test
    void shouldAnswerWhatFitsThenRefuseTooManyPipelinedRequests() throws Exception
    {
        // More than 128 requests waiting on one connection used to get no answer at all: the codec's limit closed
        // the connection. The first 128 are answered, then one refusal, and the connection closes.
        final java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        final RequestHandler slow = request ->
        {
            try
            {
                release.await(5, java.util.concurrent.TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            return HttpResponseData.json(200, "{}");
        };
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), slow))
        {
            final ListenAddress at = endpoint.boundAddress();
            final StringBuilder requests = new StringBuilder();
            for (int i = 0; i < 200; i++)
            {
                requests.append("GET /v1/health HTTP/1.1\r\nHost: ").append(at).append("\r\n\r\n");
            }
            try (java.net.Socket socket = new java.net.Socket(at.host(), at.port()))
            {
                socket.setSoTimeout(10_000);
                socket.getOutputStream().write(requests.toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                Thread.sleep(300);
                release.countDown();
                final String answers = new String(socket.getInputStream().readAllBytes(),
                    java.nio.charset.StandardCharsets.UTF_8);
                assertThat(count(answers, "HTTP/1.1 200")).isEqualTo(HttpEndpoint.Limits.DEFAULT.maxPipelined());
                assertThat(count(answers, "HTTP/1.1 429")).isEqualTo(1);
                assertThat(answers.substring(answers.indexOf("HTTP/1.1 429"))).contains("pipelined")
                    .contains("connection: close");
            }
        }
    }

    @Test
    void shouldRefuseABodyOverTheLimit() throws Exception
    {
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", ListenAddress.parse("127.0.0.1:0"), NOTHING))
        {
            final ListenAddress at = endpoint.boundAddress();
            assertThat(answerOrClosed(at, "POST /v1/jobs HTTP/1.1\r\nHost: " + at + "\r\nContent-Type: " +
                "application/json\r\nContent-Length: " + (HttpEndpoint.MAX_BODY_BYTES + 1) + "\r\n" +
                "Connection: close\r\n\r\n{")).startsWith("HTTP/1.1 413");
        }
    }

    @Test
    void shouldRefuseARequestWithTwoHostHeaders() throws Exception
    {
        final ListenAddress any = ListenAddress.parse("127.0.0.1:0");
        final AccessPolicy policy = new AccessPolicy(any, TOKEN, path -> path.equals("/v1/health"));
        try (HttpEndpoint endpoint = HttpEndpoint.start("api", any, NOTHING, policy))
        {
            final ListenAddress at = endpoint.boundAddress();
            assertThat(raw(at, "GET /v1/health HTTP/1.1\r\nHost: " + at + "\r\nHost: evil.example\r\n" +
                "Connection: close\r\n\r\n")).as("two Host headers (RFC 9112, 3.2)").startsWith("HTTP/1.1 400");
            assertThat(raw(at, "GET /v1/health HTTP/1.1\r\nHost: evil.example\r\nHost: " + at + "\r\n" +
                "Connection: close\r\n\r\n")).startsWith("HTTP/1.1 400");
            assertThat(raw(at, "GET /v1/health HTTP/1.1\r\nHost: " + at + "\r\nConnection: close\r\n\r\n"))
                .startsWith("HTTP/1.1 200");
        }
    }
}
