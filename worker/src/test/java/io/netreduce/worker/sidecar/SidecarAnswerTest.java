package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * When the loop answers a call on the call page and when it releases the call's input area: at the sums and apart
 * for a trainer that asked ({@code "inputRelease": true}), at both for one that did not. The protocol under the loop
 * is a stand-in whose sums, release and failure the test sets (what {@link Sidecar} takes from the ring's
 * {@code resultsDone()} and {@code writesAcknowledged()}, pinned in the host's NetReducePlacedAllReduceTest); the
 * socket, the page and the eventfds are real.
 */
class SidecarAnswerTest
{
    private static final int SHM_BYTES = 1 << 16;
    private static final int PAGE = SHM_BYTES;

    /** A protocol whose call state the test thread sets. */
    private static final class StandIn extends SidecarLoop
    {
        volatile boolean sumsIn;
        volatile boolean released;
        volatile String failure;
        volatile String beginFailure;
        volatile int begun;
        volatile long turns;

        StandIn(final ControlChannel control)
        {
            super(control);
        }

        @Override
        IdleStrategy idleStrategy()
        {
            return new SleepingMillisIdleStrategy(1);
        }

        @Override
        int doWork()
        {
            turns++;
            return 0;
        }

        @Override
        ObjectNode open(final JsonNode request, final ObjectNode reply) throws IOException
        {
            mapShared(Path.of(Requests.textField(request, "shm", null)), SHM_BYTES);
            return reply;
        }

        @Override
        void connect(final JsonNode request)
        {
        }

        @Override
        void beginCall(final long elements) throws CallFailedException
        {
            begun++;
            final String reason = beginFailure;
            if (reason != null)
            {
                throw new CallFailedException(reason);
            }
        }

        @Override
        int pollCall() throws CallFailedException
        {
            final String reason = failure;
            if (reason != null)
            {
                failure = null;
                throw new CallFailedException(reason);
            }
            return 0;
        }

        @Override
        boolean callDone()
        {
            return sumsIn;
        }

        @Override
        boolean inputReleased()
        {
            return released;
        }

        @Override
        void stats(final ObjectNode reply)
        {
        }
    }

    @TempDir
    Path dir;

    private SidecarHarness harness;
    private StandIn sidecar;
    private UnsafeBuffer page;

    private JsonNode start(final boolean inputRelease) throws Exception
    {
        harness = new SidecarHarness(dir.resolve("sidecar.sock"), true).serve(h -> sidecar = new StandIn(h.control));
        final Path shm = dir.resolve("shm");
        Files.write(shm, new byte[SHM_BYTES + 4096]);
        page = SidecarHarness.mapPage(shm, PAGE);
        final JsonNode opened = ask("{\"op\":\"open\",\"shm\":\"" + shm + "\",\"doorbell\":" + PAGE +
            ",\"inputRelease\":" + inputRelease + "}");
        assertThat(opened.path("doorbell").asBoolean(false)).as(opened.toString()).isTrue();
        assertThat(opened.path("inputRelease").asBoolean(!inputRelease)).as(opened.toString())
            .isEqualTo(inputRelease);
        harness.answer.drain();
        return opened;
    }

    @AfterEach
    void stop() throws Exception
    {
        if (harness != null)
        {
            harness.close();
        }
    }

    private JsonNode ask(final String line) throws Exception
    {
        return harness.ask(line);
    }

    private void post(final int sequence)
    {
        page.putLongVolatile(CallPage.ELEMENTS_OFFSET, 100);
        page.putLongVolatile(CallPage.REQUEST_OFFSET, ((long)~sequence << 32) | (sequence & 0xFFFF_FFFFL));
        harness.doorbell.ring();
    }

    private void awaitWord(final int offset, final int value) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (page.getIntVolatile(offset) != value)
        {
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError("word at " + offset + " never became " + value + ": " +
                    page.getIntVolatile(offset));
            }
            Thread.sleep(1);
        }
    }

    private void awaitWordAtLeast(final int offset, final int value) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (page.getIntVolatile(offset) < value)
        {
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError("word at " + offset + " never reached " + value + ": " +
                    page.getIntVolatile(offset));
            }
            Thread.sleep(1);
        }
    }

    private int answered()
    {
        return page.getIntVolatile(CallPage.ANSWER_SEQUENCE_OFFSET);
    }

    private int released()
    {
        return page.getIntVolatile(CallPage.RELEASED_SEQUENCE_OFFSET);
    }

    @Test
    void shouldAnswerAtTheSumsAndReleaseTheInputAreaApartWhenTheTrainerAskedForIt() throws Exception
    {
        start(true);
        post(1);
        Thread.sleep(50);
        assertThat(answered()).isZero();
        sidecar.sumsIn = true;
        awaitWord(CallPage.ANSWER_SEQUENCE_OFFSET, 1);
        assertThat(page.getInt(CallPage.STATUS_OFFSET)).isEqualTo(CallPage.STATUS_OK);
        assertThat(SidecarHarness.awaitBell(harness.answer)).as("the answer's bell").isTrue();
        Thread.sleep(50);
        assertThat(released()).as("the input area, its writes not acknowledged").isZero();
        // a call posted before the release (a trainer's mistake) waits: the loop takes nothing until then
        post(2);
        Thread.sleep(50);
        assertThat(answered()).isEqualTo(1);

        assertThat(sidecar.begun).isEqualTo(1);

        sidecar.released = true;
        // 1, or already 2: the loop may take the second call, answer it and release its input within the
        // millisecond this test sleeps between looks (a CI run saw only the 2)
        awaitWordAtLeast(CallPage.RELEASED_SEQUENCE_OFFSET, 1);
        assertThat(SidecarHarness.awaitBell(harness.answer)).as("the release's bell").isTrue();
        // now the second call is taken, its sums in and its input released at once: one answer, the release with it
        awaitWord(CallPage.ANSWER_SEQUENCE_OFFSET, 2);
        assertThat(released()).isEqualTo(2);
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("calls").asInt()).as(stats.toString()).isEqualTo(2);
        assertThat(stats.path("failedCalls").asInt()).isZero();
    }

    @Test
    void shouldAnswerOnlyWhenTheInputAreaIsReleasedToATrainerThatDidNotAsk() throws Exception
    {
        start(false);
        sidecar.sumsIn = true;
        post(1);
        Thread.sleep(100);
        assertThat(answered()).as("sums in, writes not acknowledged").isZero();
        sidecar.released = true;
        awaitWord(CallPage.ANSWER_SEQUENCE_OFFSET, 1);
        assertThat(released()).isEqualTo(1);
    }

    @Test
    void shouldReleaseTheInputAreaWhenTheRingFailsAfterTheAnswerAndCountIt() throws Exception
    {
        start(true);
        sidecar.sumsIn = true;
        post(1);
        awaitWord(CallPage.ANSWER_SEQUENCE_OFFSET, 1);
        assertThat(page.getInt(CallPage.STATUS_OFFSET)).isEqualTo(CallPage.STATUS_OK);
        assertThat(released()).isZero();
        sidecar.failure = "send of message 7 failed: RETRY_EXCEEDED";
        awaitWord(CallPage.RELEASED_SEQUENCE_OFFSET, 1);
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("calls").asInt()).as(stats.toString()).isEqualTo(1);
        assertThat(stats.path("failedCalls").asInt()).isZero();
        assertThat(stats.path("callsFailedAfterAnswer").asInt()).isEqualTo(1);
    }

    @Test
    void shouldAnswerACallThatFailsAsItBeginsAndKeepDrivingTheEndpoint() throws Exception
    {
        start(true);
        // What Sidecar throws when a neighbour's message came through unaggregated before this rank called: the
        // call's first window is posted but not yet sent; a sidecar that ended here never sent it.
        sidecar.beginFailure = "message 0 from rank 0 arrived unaggregated";
        post(1);
        awaitWord(CallPage.ANSWER_SEQUENCE_OFFSET, 1);
        assertThat(page.getInt(CallPage.STATUS_OFFSET)).isEqualTo(CallPage.STATUS_FAILED);
        assertThat(released()).as("nothing will read the input area").isEqualTo(1);
        // the reason went on the socket before the page was answered
        assertThat(harness.in.readLine()).contains("arrived unaggregated");

        final JsonNode json = ask("{\"op\":\"allreduce\",\"elements\":100}");
        assertThat(json.path("ok").asBoolean(true)).as(json.toString()).isFalse();
        assertThat(json.path("error").asText()).contains("arrived unaggregated");

        final long turns = sidecar.turns;
        Thread.sleep(50);
        assertThat(sidecar.turns).as("the loop still drives the endpoint").isGreaterThan(turns);
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("failedCalls").asInt()).as(stats.toString()).isEqualTo(2);
        assertThat(sidecar.begun).isEqualTo(2);
    }
}
