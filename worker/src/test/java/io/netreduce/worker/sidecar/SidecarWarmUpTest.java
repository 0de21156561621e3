package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The warm-up a sidecar runs between its ring's connect and the first call ({@code worker serve --warm-up-frames}):
 * it runs to the frames asked for while the loop is otherwise idle, answering requests meanwhile, and stops at the
 * first call whatever it has done. The sidecar sits on a memory port and connects its ring to itself.
 */
class SidecarWarmUpTest
{
    @TempDir
    Path dir;

    private SidecarHarness sidecar;

    @AfterEach
    void stop() throws Exception
    {
        if (sidecar != null)
        {
            sidecar.close();
        }
    }

    private void openAndConnect(final long warmUpFrames) throws Exception
    {
        sidecar = new SidecarHarness(dir.resolve("sidecar.sock"), false)
            .serve(h -> SidecarHarness.memorySidecar(h, warmUpFrames));
        final Path shm = dir.resolve("shm");
        Files.write(shm, new byte[1 << 20]);
        final JsonNode opened = sidecar.ask("{\"op\":\"open\",\"rank\":0,\"world\":2,\"ringId\":1,\"window\":4," +
            "\"msgLen\":4,\"payloadSize\":4096,\"timeoutMs\":300,\"shm\":\"" + shm + "\",\"shmBytes\":1048576}");
        assertThat(opened.path("ok").asBoolean()).as(opened.toString()).isTrue();
        assertThat(sidecar.ask("{\"op\":\"stats\"}").has("warmUpFrames")).as("no warm-up before the connect")
            .isFalse();
        final JsonNode connected = sidecar.ask("{\"op\":\"connect\",\"successor\":\"" +
            opened.path("receive").asText() + "\",\"predecessor\":\"" + opened.path("send").asText() + "\"}");
        assertThat(connected.path("ok").asBoolean()).as(connected.toString()).isTrue();
    }

    @Test
    void shouldRunTheWarmUpToTheFramesAskedForOnceTheRingIsConnected() throws Exception
    {
        openAndConnect(20_000);
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        JsonNode stats = sidecar.ask("{\"op\":\"stats\"}");
        while (stats.path("warmingUp").asBoolean(true) && System.nanoTime() < deadline)
        {
            Thread.sleep(20);
            stats = sidecar.ask("{\"op\":\"stats\"}"); // answered while it runs
        }
        assertThat(stats.path("warmingUp").asBoolean(true)).as(stats.toString()).isFalse();
        assertThat(stats.path("warmUpFrames").asLong()).isGreaterThanOrEqualTo(20_000);
        assertThat(stats.path("warmUpCalls").asLong()).isPositive();
        assertThat(stats.path("calls").asLong()).as("the warm-up's calls are not the trainer's").isZero();
    }

    @Test
    void shouldStopTheWarmUpAtTheFirstCall() throws Exception
    {
        openAndConnect(1L << 40);
        Thread.sleep(100);
        // nobody answers this ring: the call fails after the open's 300 ms, but the warm-up stopped as it began
        final JsonNode call = sidecar.ask("{\"op\":\"allreduce\",\"elements\":100}");
        assertThat(call.path("ok").asBoolean(true)).as(call.toString()).isFalse();
        final JsonNode stats = sidecar.ask("{\"op\":\"stats\"}");
        assertThat(stats.path("warmingUp").asBoolean(true)).as(stats.toString()).isFalse();
        assertThat(stats.path("warmUpFrames").asLong()).isPositive().isLessThan(1L << 40);
        final long frames = stats.path("warmUpFrames").asLong();
        Thread.sleep(100);
        assertThat(sidecar.ask("{\"op\":\"stats\"}").path("warmUpFrames").asLong()).isEqualTo(frames);
    }
}
