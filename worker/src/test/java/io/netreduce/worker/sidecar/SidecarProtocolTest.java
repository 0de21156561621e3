package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The sidecar's request protocol against a real Unix socket and a sidecar loop on a memory port: every malformed or
 * out-of-order request gets an error reply naming what is wrong, and the sidecar keeps serving.
 */
class SidecarProtocolTest
{
    @TempDir
    Path dir;

    private SidecarHarness sidecar;
    private Path shm;

    @BeforeEach
    void start() throws Exception
    {
        sidecar = new SidecarHarness(dir.resolve("sidecar.sock"), false).serve(SidecarHarness::memorySidecar);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(sidecar.socket)))
            .isEqualTo("rw-------");
        shm = dir.resolve("shm");
        Files.write(shm, new byte[1 << 18]); // two areas of two 64 KiB messages
    }

    @AfterEach
    void stop() throws Exception
    {
        sidecar.close();
    }

    private JsonNode ask(final String line) throws Exception
    {
        return sidecar.ask(line);
    }

    private String open(final String extra)
    {
        return "{\"op\":\"open\",\"rank\":0,\"world\":2,\"ringId\":1,\"window\":8,\"msgLen\":16,\"payloadSize\":4096," +
            "\"shm\":\"" + shm + "\",\"shmBytes\":262144" + extra + "}";
    }

    private static void assertError(final JsonNode reply, final String text)
    {
        assertThat(reply.path("ok").asBoolean(true)).as(reply.toString()).isFalse();
        assertThat(reply.path("error").asText()).contains(text);
    }

    @Test
    void shouldAnswerMalformedRequestsWithAnErrorAndKeepServing() throws Exception
    {
        assertError(ask("not json"), "not JSON");
        assertError(ask("[1,2]"), "\"op\"");
        assertError(ask("{\"op\":\"frobnicate\"}"), "unknown op 'frobnicate'");
        assertError(ask("{\"op\":\"allreduce\",\"elements\":1}"), "allreduce before connect");
        assertError(ask("{\"op\":\"connect\",\"successor\":\"x\",\"predecessor\":\"y\"}"), "connect before open");
        assertError(ask("x".repeat(ControlChannel.MAX_LINE + 10)), "longer than");
        assertThat(ask("{\"op\":\"stats\"}").path("calls").asInt(-1)).isZero();
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldRefuseAnOpenThatDoesNotFitNamingTheField() throws Exception
    {
        assertError(ask(open(",\"rank\":2")), "0 <= rank < world");
        assertError(ask(open(",\"payloadSize\":1024")), "--pmtu");
        assertError(ask(open(",\"elementType\":\"fp64\"")), "fp64");
        assertError(ask(open(",\"inetTag\":\"TOOLONG\"")), "inetTag");
        assertError(ask(open(",\"shmBytes\":1048576")), "fewer than shmBytes");
        assertError(ask(open(",\"shmBytes\":131071")), "holds no message");
        assertError(ask(open(",\"shmBytes\":0")), "shmBytes must be");
        assertError(ask(open(",\"shm\":\"" + dir.resolve("missing") + "\"")), "not a regular file");
        assertError(ask(open(",\"window\":\"eight\"")), "\"window\" must be an integer");
        assertError(ask(open(",\"ecnGain\":0")), "ecnGain must be in (0, 1]");
        assertError(ask(open(",\"ecnGain\":\"high\"")), "\"ecnGain\" must be a number");
        assertError(ask(open(",\"ecnWindow\":1")), "\"ecnWindow\" must be true or false");
        assertError(ask(open(",\"ecnMinWindow\":0")), "ecnMinWindow must be at least 1: 0");
        assertError(ask(open(",\"ecnMinWindow\":2.5")), "\"ecnMinWindow\" must be an integer");
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldTakeTheCongestionControlSettingsOfTheOpen() throws Exception
    {
        final JsonNode opened = ask(open(",\"ecnWindow\":false,\"ecnGain\":0.25,\"ecnMinWindow\":3"));
        assertThat(opened.path("ok").asBoolean()).as(opened.toString()).isTrue();
        assertThat(ask("{\"op\":\"connect\",\"successor\":\"" + opened.path("receive").asText() +
            "\",\"predecessor\":\"" + opened.path("send").asText() + "\"}").path("ok").asBoolean()).isTrue();
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("ecnWindow").asBoolean(true)).as(stats.toString()).isFalse();
        assertThat(stats.path("window").asInt()).isEqualTo(8);
        assertThat(stats.path("windowFloor").asInt()).as(stats.toString()).isEqualTo(3);
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldOpenOnceAndCheckEveryCallAgainstTheSharedMemory() throws Exception
    {
        final JsonNode opened = ask(open(""));
        assertThat(opened.path("ok").asBoolean()).as(opened.toString()).isTrue();
        assertThat(opened.path("send").asText()).contains("qpn=").contains("ip=10.0.0.1");
        assertThat(opened.path("receive").asText()).contains("rkey=").contains("len=131072");
        // the areas' geometry: 262144 bytes hold an input and an output area of two 16 x 4096-byte messages
        assertThat(opened.path("messages").asInt()).isEqualTo(2);
        assertThat(opened.path("messageBytes").asInt()).isEqualTo(65536);
        assertThat(opened.path("input").asInt(-1)).isZero();
        assertThat(opened.path("output").asInt()).isEqualTo(131072);
        assertError(ask(open("")), "already serves a ring");
        assertError(ask("{\"op\":\"connect\",\"successor\":\"qpn=1\",\"predecessor\":\"garbage\"}"), "connection info");
        final JsonNode peer = opened;
        assertThat(ask("{\"op\":\"connect\",\"successor\":\"" + peer.path("receive").asText() +
            "\",\"predecessor\":\"" + peer.path("send").asText() + "\"}").path("ok").asBoolean()).isTrue();
        // The window follows ECN marks by default, starting at the ring's window.
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("ecnWindow").asBoolean(false)).as(stats.toString()).isTrue();
        assertThat(stats.path("window").asInt()).isEqualTo(8);
        assertThat(stats.path("windowCap").asInt()).isEqualTo(8);
        assertThat(stats.path("alpha").asDouble()).isEqualTo(1.0);
        assertThat(stats.path("markedResults").asLong(-1)).isZero();
        // two messages of 65528 data bytes: 32764 fp32 elements at most
        assertError(ask("{\"op\":\"allreduce\",\"elements\":32765}"),
            "do not fit the input area: it holds 2 messages of 65528 data bytes (32764 elements)");
        assertError(ask("{\"op\":\"allreduce\",\"elements\":0}"), "do not fit");
        assertError(ask("{\"op\":\"allreduce\",\"offset\":0,\"elements\":4}"), "no \"offset\"");
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }
}
