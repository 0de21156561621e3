package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import io.netreduce.protocol.port.Doorbell;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The call doorbell ({@link CallPage}) against a sidecar loop on a memory port and a real Unix socket: calls posted
 * on the page are taken without a JSON line, answered on the page with the trainer's eventfd rung, and a failed
 * call's error comes on the socket before its failed status; control stays JSON.
 */
class SidecarDoorbellTest
{
    private static final int SHM_BYTES = 1 << 18; // two areas of two 64 KiB messages
    private static final int PAGE = SHM_BYTES;    // the call page right behind them, as the Python side puts it

    @TempDir
    Path dir;

    private SidecarHarness sidecar;
    private Doorbell doorbell;
    private Doorbell answer;
    private BufferedReader in;
    private Path shm;
    private UnsafeBuffer page;

    private void start(final boolean withAnswerBell) throws Exception
    {
        sidecar = new SidecarHarness(dir.resolve("sidecar.sock"), withAnswerBell).serve(SidecarHarness::memorySidecar);
        doorbell = sidecar.doorbell;
        answer = sidecar.answer;
        in = sidecar.in;
        shm = dir.resolve("shm");
        Files.write(shm, new byte[SHM_BYTES + 4096]);
        page = SidecarHarness.mapPage(shm, PAGE);
    }

    @AfterEach
    void stop() throws Exception
    {
        if (sidecar != null)
        {
            sidecar.close();
        }
    }

    private JsonNode ask(final String line) throws Exception
    {
        return sidecar.ask(line);
    }

    private String open(final String extra)
    {
        return "{\"op\":\"open\",\"rank\":0,\"world\":2,\"ringId\":1,\"window\":8,\"msgLen\":16,\"payloadSize\":4096," +
            "\"timeoutMs\":300,\"shm\":\"" + shm + "\",\"shmBytes\":" + SHM_BYTES + extra + "}";
    }

    /** The trainer's side: post a call, ring the sidecar, wait for the answer word (as python/netreduce does). */
    private int[] call(final int sequence, final long elements, final long seconds) throws Exception
    {
        page.putLongVolatile(CallPage.ELEMENTS_OFFSET, elements);
        page.putLongVolatile(CallPage.REQUEST_OFFSET, request(sequence));
        doorbell.ring();
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (page.getIntVolatile(CallPage.ANSWER_SEQUENCE_OFFSET) != sequence)
        {
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError("no answer on the call page within " + seconds + " s");
            }
            Thread.onSpinWait();
        }
        return new int[] {page.getInt(CallPage.STATUS_OFFSET), (int)page.getLong(CallPage.MICROS_OFFSET)};
    }

    private static long request(final int sequence)
    {
        return ((long)~sequence << 32) | (sequence & 0xFFFF_FFFFL);
    }

    private String errorLine() throws Exception
    {
        final String line = CompletableFuture.supplyAsync(() ->
        {
            try
            {
                return in.readLine();
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        }, sidecar.threads).get(10, TimeUnit.SECONDS);
        final JsonNode reply = SidecarLines.JSON.readTree(line);
        assertThat(reply.path("ok").asBoolean(true)).as(line).isFalse();
        return reply.path("error").asText();
    }

    private void connectToItself(final JsonNode opened) throws Exception
    {
        assertThat(ask("{\"op\":\"connect\",\"successor\":\"" + opened.path("receive").asText() +
            "\",\"predecessor\":\"" + opened.path("send").asText() + "\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldTakeACallPostedOnTheCallPageAndAnswerItThereRingingTheTrainer() throws Exception
    {
        start(true);
        final JsonNode opened = ask(open(",\"doorbell\":" + PAGE));
        assertThat(opened.path("doorbell").asBoolean(false)).as(opened.toString()).isTrue();
        answer.drain();

        // Before connect: the call is refused, its error on the socket, then the failed status and the bell.
        assertThat(call(1, 4, 10)[0]).isEqualTo(CallPage.STATUS_FAILED);
        assertThat(errorLine()).contains("allreduce before connect");
        assertThat(SidecarHarness.awaitBell(answer)).isTrue();

        connectToItself(opened);
        // A request word caught half-written (its halves disagree) is not a call; once whole, it is.
        page.putLongVolatile(CallPage.ELEMENTS_OFFSET, 32765);
        page.putLongVolatile(CallPage.REQUEST_OFFSET, (request(1) & 0xFFFF_FFFF_0000_0000L) | 2);
        doorbell.ring();
        Thread.sleep(200);
        assertThat(page.getIntVolatile(CallPage.ANSWER_SEQUENCE_OFFSET)).isEqualTo(1);
        // Too many elements for the input area: refused at once, by the page.
        assertThat(call(2, 32765, 10)[0]).isEqualTo(CallPage.STATUS_FAILED);
        assertThat(errorLine()).contains("do not fit the input area");

        // A call that starts: its messages go out of the port (nobody answers on this memory port), and it fails
        // after the open's 300 ms without progress, answered on the page like a finished one.
        final long start = System.nanoTime();
        assertThat(call(3, 1000, 10)[0]).isEqualTo(CallPage.STATUS_FAILED);
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isGreaterThanOrEqualTo(250);
        assertThat(errorLine()).isNotEmpty();
        assertThat(SidecarHarness.awaitBell(answer)).isTrue();

        // Control stays JSON, and counts the calls taken by the page.
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("failedCalls").asInt()).as(stats.toString()).isEqualTo(1);
        assertThat(stats.path("bytesPosted").asLong()).isPositive();
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldTakeNoCallFromThePageWithoutTheTrainersAnswerBell() throws Exception
    {
        start(false);
        final JsonNode opened = ask(open(",\"doorbell\":" + PAGE));
        assertThat(opened.path("ok").asBoolean()).as(opened.toString()).isTrue();
        assertThat(opened.path("doorbell").asBoolean(true)).isFalse();
        // a request word on the page is not a call: the JSON path still answers, in order
        page.putLongVolatile(CallPage.ELEMENTS_OFFSET, 4);
        page.putLongVolatile(CallPage.REQUEST_OFFSET, request(1));
        doorbell.ring();
        assertThat(ask("{\"op\":\"allreduce\",\"elements\":4}").path("error").asText())
            .contains("allreduce before connect");
        assertThat(page.getIntVolatile(CallPage.ANSWER_SEQUENCE_OFFSET)).isZero();
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldRefuseACallPageOutsideTheSharedFile() throws Exception
    {
        start(true);
        assertThat(ask(open(",\"doorbell\":" + (SHM_BYTES + 4096))).path("error").asText())
            .contains("doorbell " + (SHM_BYTES + 4096) + " must be an 8-byte aligned offset");
        assertThat(ask("{\"op\":\"close\"}").path("ok").asBoolean()).isTrue();
    }

    @Test
    void shouldAdoptOnlyANonBlockingEventfd() throws Exception
    {
        assertThatThrownBy(() -> Doorbell.adopt(987_654)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("not open");
        try (FileChannel ignored = FileChannel.open(Files.createFile(dir.resolve("plain")), StandardOpenOption.READ))
        {
            // descriptor numbers are not visible to Java; /proc/self/fd/0 is no eventfd in any case
            assertThatThrownBy(() -> Doorbell.adopt(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not an eventfd");
        }
    }
}
