package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.UnixFdListener;
import org.agrona.concurrent.SystemNanoClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The sidecar agent over its real Unix socket, sessions on software endpoints over memory ports: a trainer's request
 * is answered with its session's socket, the session is a sidecar that answers requests, and one session after
 * another runs in the same agent. The eventfds' way in (SCM_RIGHTS) is covered end to end by python/tests/test_bed.py
 * (a Java client cannot send descriptors).
 */
class SidecarAgentTest
{
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    private UnixFdListener door;
    private Thread running;
    private final ByteArrayOutputStream told = new ByteArrayOutputStream();
    private final List<RcEndpoint> opened = new ArrayList<>();
    private SidecarAgent agent;

    @BeforeEach
    void start() throws IOException
    {
        door = UnixFdListener.open(dir.resolve("agent.sock"));
        agent = new SidecarAgent(door, rc ->
        {
            final RcEndpoint endpoint = new RcEndpoint(new MemoryPort("session"), rc, SystemNanoClock.INSTANCE,
                InetAddress.getByName("10.0.0.1"), 0x02_00_00_00_00_01L);
            synchronized (opened)
            {
                opened.add(endpoint);
            }
            return endpoint;
        }, 2, 0, session -> { }, new PrintStream(told, true, StandardCharsets.UTF_8));
        running = Thread.ofPlatform().daemon().start(agent::run);
    }

    @AfterEach
    void stop() throws InterruptedException
    {
        door.close();
        running.join(TimeUnit.SECONDS.toMillis(10));
    }

    @Test
    void shouldMakeTheAgentSocketOwnerOnly() throws IOException
    {
        assertThat(Files.getPosixFilePermissions(door.path())).hasToString("[OWNER_READ, OWNER_WRITE]");
    }

    @Test
    void shouldServeOneSessionAfterAnotherInTheSameProcess() throws Exception
    {
        for (int turn = 1; turn <= 2; turn++)
        {
            final Path socket = dir.resolve("session-" + turn + ".sock");
            final JsonNode answer = request("{\"op\":\"session\",\"socket\":\"" + socket + "\",\"firstQpn\":" +
                (0x11 + 256 * turn) + "}");
            assertThat(answer.path("ok").asBoolean()).as(answer.toString()).isTrue();
            assertThat(answer.path("listening").asText()).isEqualTo(socket.toString());
            assertThat(answer.path("session").asLong()).isEqualTo(turn);

            try (SocketChannel session = SocketChannel.open(UnixDomainSocketAddress.of(socket)))
            {
                final JsonNode stats = ask(session, "{\"op\":\"stats\"}");
                assertThat(stats.path("ok").asBoolean()).as(stats.toString()).isTrue();
                assertThat(stats.path("calls").asLong()).isZero();
                ask(session, "{\"op\":\"close\"}");
            }
            awaitTold("session " + turn + " ended");
        }
        assertThat(agent.sessions()).isEqualTo(2);
        assertThat(agent.activeSessions()).isZero();
        assertThat(opened).hasSize(2);
        assertThat(opened.get(1)).isNotSameAs(opened.get(0));
    }

    @Test
    void shouldRefuseARequestThatIsNotASession() throws Exception
    {
        final JsonNode answer = request("{\"op\":\"allreduce\",\"elements\":4}");
        assertThat(answer.path("ok").asBoolean()).isFalse();
        assertThat(answer.path("error").asText()).contains("{\"op\":\"session\"");
        assertThat(agent.sessions()).isZero();
    }

    @Test
    void shouldRefuseASessionWhoseSocketIsNotAnAbsolutePath() throws Exception
    {
        final JsonNode answer = request("{\"op\":\"session\",\"socket\":\"relative.sock\"}");
        assertThat(answer.path("error").asText()).contains("\"socket\" must be an absolute path");
    }

    @Test
    void shouldRefuseASessionWithAPmtuTheEndpointCannotRun() throws Exception
    {
        final JsonNode answer = request("{\"op\":\"session\",\"socket\":\"" + dir.resolve("s.sock") +
            "\",\"pmtu\":100}");
        assertThat(answer.path("ok").asBoolean()).isFalse();
        assertThat(answer.path("error").asText()).containsIgnoringCase("pmtu");
    }

    @Test
    void shouldRefuseASessionBeyondItsMaximum() throws Exception
    {
        final List<SocketChannel> held = new ArrayList<>();
        try
        {
            for (int turn = 1; turn <= 2; turn++)
            {
                final Path socket = dir.resolve("held-" + turn + ".sock");
                assertThat(request("{\"op\":\"session\",\"socket\":\"" + socket + "\",\"firstQpn\":" +
                    (0x11 + 256 * turn) + "}").path("ok").asBoolean()).isTrue();
                held.add(SocketChannel.open(UnixDomainSocketAddress.of(socket)));
            }
            final JsonNode third = request("{\"op\":\"session\",\"socket\":\"" + dir.resolve("third.sock") + "\"}");
            assertThat(third.path("error").asText()).contains("runs 2 sessions already");
        }
        finally
        {
            for (final SocketChannel channel : held)
            {
                channel.close();
            }
        }
    }

    @Test
    void shouldDropAConnectionThatSendsNothingAndServeTheNext() throws Exception
    {
        agent.requestTimeoutMs(300);
        try (SocketChannel silent = SocketChannel.open(UnixDomainSocketAddress.of(door.path())))
        {
            final long start = System.nanoTime();
            final String answer = new String(Channels.newInputStream(silent).readAllBytes(), StandardCharsets.UTF_8);
            assertThat(answer).contains("nothing for 300 ms");
            assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(250));
        }
        assertThat(request("{\"op\":\"stats\"}").path("error").asText()).contains("{\"op\":\"session\"");
    }

    @Test
    void shouldNameTheFieldAtFaultInARequest()
    {
        assertThatThrownBy(() -> SidecarAgent.parse("{\"op\":\"session\",\"socket\":\"/x\",\"acceptTimeout\":0}", 0))
            .hasMessageContaining("acceptTimeout");
        assertThatThrownBy(() -> SidecarAgent.parse("{\"op\":\"session\",\"socket\":\"/x\"}", 1))
            .hasMessageContaining("two eventfds");
        assertThat(SidecarAgent.parse("{\"op\":\"session\",\"socket\":\"/x\",\"rtoUs\":5000,\"firstQpn\":273}", 2)
            .rc().firstQpn()).isEqualTo(273);
    }

    private JsonNode request(final String line) throws IOException
    {
        try (SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX))
        {
            channel.connect(UnixDomainSocketAddress.of(door.path()));
            channel.write(ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8)));
            return JSON.readTree(new String(Channels.newInputStream(channel).readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    private static JsonNode ask(final SocketChannel channel, final String line) throws IOException
    {
        channel.write(ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8)));
        final StringBuilder reply = new StringBuilder();
        final ByteBuffer one = ByteBuffer.allocate(1);
        while (true)
        {
            one.clear();
            if (channel.read(one) < 0)
            {
                break;
            }
            final char c = (char)one.get(0);
            if (c == '\n')
            {
                break;
            }
            reply.append(c);
        }
        return reply.isEmpty() ? JSON.createObjectNode() : JSON.readTree(reply.toString());
    }

    private void awaitTold(final String text) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!told.toString(StandardCharsets.UTF_8).contains(text) && System.nanoTime() < deadline)
        {
            Thread.sleep(5);
        }
        assertThat(told.toString(StandardCharsets.UTF_8)).contains(text);
    }
}
