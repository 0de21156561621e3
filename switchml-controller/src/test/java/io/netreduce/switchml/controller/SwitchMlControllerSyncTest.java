package io.netreduce.switchml.controller;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SwitchMlControllerSyncTest
{
    private ControllerHarness harness;

    @BeforeEach
    void start() throws Exception
    {
        harness = new ControllerHarness();
    }

    @AfterEach
    void stop()
    {
        harness.close();
    }

    private Future<Boolean> barrier(final int numWorkers)
    {
        final SwitchMlControllerClient client = harness.client();
        return harness.async(() ->
        {
            client.barrier(numWorkers);
            return true;
        });
    }

    private Future<Long> broadcast(final long value, final int rank, final int numWorkers, final int root)
    {
        final SwitchMlControllerClient client = harness.client();
        return harness.async(() -> client.broadcast(value, rank, numWorkers, root));
    }

    /** A client whose calls give up after a second, its connection made already (so the deadline is the call's). */
    private SwitchMlControllerClient impatientClient()
    {
        final SwitchMlControllerClient client =
            new SwitchMlControllerClient("127.0.0.1", harness.controller.address().getPort(), Duration.ofMillis(1000));
        client.barrier(1);
        return client;
    }

    private static Status.Code codeOf(final Future<?> call) throws InterruptedException
    {
        return statusOf(call).getCode();
    }

    private static Status statusOf(final Future<?> call) throws InterruptedException
    {
        try
        {
            call.get(5, TimeUnit.SECONDS);
        }
        catch (final ExecutionException e)
        {
            assertThat(e.getCause()).isInstanceOf(StatusRuntimeException.class);
            return ((StatusRuntimeException)e.getCause()).getStatus();
        }
        catch (final java.util.concurrent.TimeoutException e)
        {
            throw new AssertionError("the call neither returned nor failed", e);
        }
        return Status.OK;
    }

    @Test
    void shouldReleaseEveryBarrierCallerWhenTheLastArrivesAndNotBefore() throws Exception
    {
        final List<Future<Boolean>> first = List.of(barrier(4), barrier(4), barrier(4));
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 3, "three callers wait in the barrier");
        Thread.sleep(50);
        assertThat(first).noneMatch(Future::isDone);
        assertThat(harness.controller.barriersCompleted()).isZero();

        final Future<Boolean> last = barrier(4);
        for (final Future<Boolean> call : first)
        {
            assertThat(call.get(5, TimeUnit.SECONDS)).isTrue();
        }
        assertThat(last.get(5, TimeUnit.SECONDS)).isTrue();
        assertThat(harness.controller.barriersCompleted()).isEqualTo(1);
        assertThat(harness.controller.barrierWaiting()).isZero();
    }

    @Test
    void shouldRunConsecutiveBarrierRoundsEachWithItsOwnCallers() throws Exception
    {
        final SwitchMlControllerClient[] workers = {harness.client(), harness.client(), harness.client()};
        final List<Future<Integer>> runs = new ArrayList<>();
        for (final SwitchMlControllerClient worker : workers)
        {
            runs.add(harness.async(() ->
            {
                worker.barrier(3);
                worker.barrier(3);
                return 2;
            }));
        }
        for (final Future<Integer> run : runs)
        {
            assertThat(run.get(5, TimeUnit.SECONDS)).isEqualTo(2);
        }
        assertThat(harness.controller.barriersCompleted()).isEqualTo(2);

        final Future<Boolean> third = barrier(2);
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 1, "a new round has begun");
        assertThat(third).isNotDone();
        assertThat(barrier(2).get(5, TimeUnit.SECONDS)).isTrue();
        assertThat(third.get(5, TimeUnit.SECONDS)).isTrue();
        assertThat(harness.controller.barriersCompleted()).isEqualTo(3);
    }

    @Test
    void shouldReturnAtOnceFromABarrierOfOneWorker() throws Exception
    {
        harness.client().barrier(1);
        assertThat(harness.controller.barriersCompleted()).isEqualTo(1);
    }

    @Test
    void shouldForgetABarrierCallerThatGaveUp() throws Exception
    {
        try (SwitchMlControllerClient impatient = impatientClient())
        {
            final Future<Boolean> givingUp = harness.async(() ->
            {
                impatient.barrier(2);
                return true;
            });
            ControllerHarness.await(() -> harness.controller.barrierWaiting() == 1, "the impatient caller waits");
            assertThat(codeOf(givingUp)).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
        }
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 0, "the caller that gave up has left");

        final Future<Boolean> first = barrier(2);
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 1, "one caller waits");
        assertThat(first).isNotDone();
        assertThat(barrier(2).get(5, TimeUnit.SECONDS)).isTrue();
        assertThat(first.get(5, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void shouldSendTheRootsValueToEveryRankWhenTheRootArrivesLast() throws Exception
    {
        final List<Future<Long>> others = List.of(broadcast(0, 1, 4, 0), broadcast(0, 2, 4, 0), broadcast(0, 3, 4, 0));
        ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 3, "three ranks wait for the root");
        assertThat(others).noneMatch(Future::isDone);

        assertThat(broadcast(0x1234_5678_9ABC_DEF0L, 0, 4, 0).get(5, TimeUnit.SECONDS)).isEqualTo(0x1234_5678_9ABC_DEF0L);
        for (final Future<Long> other : others)
        {
            assertThat(other.get(5, TimeUnit.SECONDS)).isEqualTo(0x1234_5678_9ABC_DEF0L);
        }
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(1);
    }

    @Test
    void shouldAnswerRanksAtOnceWhenTheRootArrivedFirst() throws Exception
    {
        final SwitchMlControllerClient client = harness.client();
        assertThat(client.broadcast(-7, 2, 3, 2)).isEqualTo(-7);
        assertThat(client.broadcast(99, 0, 3, 2)).isEqualTo(-7);
        assertThat(harness.controller.broadcastsCompleted()).isZero();
        assertThat(client.broadcast(98, 1, 3, 2)).isEqualTo(-7);
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(1);
    }

    @Test
    void shouldPutARanksSecondBroadcastInTheNextRound() throws Exception
    {
        final SwitchMlControllerClient client = harness.client();
        assertThat(client.broadcast(11, 0, 2, 0)).isEqualTo(11);
        assertThat(client.broadcast(22, 0, 2, 0)).isEqualTo(22);
        assertThat(client.broadcast(0, 1, 2, 0)).isEqualTo(11);
        assertThat(client.broadcast(0, 1, 2, 0)).isEqualTo(22);
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(2);

        final Future<Long> early = broadcast(0, 1, 2, 0);
        ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 1, "rank 1 waits for round three");
        assertThat(client.broadcast(33, 0, 2, 0)).isEqualTo(33);
        assertThat(early.get(5, TimeUnit.SECONDS)).isEqualTo(33);
    }

    @Test
    void shouldForgetABroadcastCallerThatGaveUpSoItsRetryJoinsTheSameRound() throws Exception
    {
        try (SwitchMlControllerClient impatient = impatientClient())
        {
            final Future<Long> givingUp = harness.async(() -> impatient.broadcast(0, 1, 2, 0));
            ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 1, "the impatient caller waits");
            assertThat(codeOf(givingUp)).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
        }
        ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 0, "the caller that gave up has left");

        final Future<Long> retry = broadcast(0, 1, 2, 0);
        ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 1, "the retry waits");
        assertThat(harness.client().broadcast(44, 0, 2, 0)).isEqualTo(44);
        assertThat(retry.get(5, TimeUnit.SECONDS)).isEqualTo(44);
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(1);
    }

    @Test
    void shouldRefuseABarrierOfNoWorkersOrOfMoreThanSixtyFour() throws Exception
    {
        final SwitchMlControllerClient client = harness.client();
        for (final int numWorkers : new int[] {0, 65, -1})
        {
            assertThatThrownBy(() -> client.barrier(numWorkers))
                .isInstanceOf(StatusRuntimeException.class)
                .hasMessageContaining("INVALID_ARGUMENT")
                .hasMessageContaining("num_workers must be 1 to 64, not " + Integer.toUnsignedString(numWorkers));
        }
        client.barrier(1);
        assertThat(harness.controller.barriersCompleted()).isEqualTo(1);
    }

    @Test
    void shouldRefuseTheLateBarrierCallerThatDisagreesOnTheNumberOfWorkers() throws Exception
    {
        final Future<Boolean> first = barrier(2);
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 1, "one caller waits");
        assertThatThrownBy(() -> harness.client().barrier(3))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("INVALID_ARGUMENT")
            .hasMessageContaining("num_workers 3 disagrees with the barrier in progress")
            .hasMessageContaining("num_workers 2");
        assertThat(first).isNotDone();
        assertThat(barrier(2).get(5, TimeUnit.SECONDS)).isTrue();
        assertThat(first.get(5, TimeUnit.SECONDS)).isTrue();
    }

    @Test
    void shouldRefuseABroadcastWhoseRankOrRootIsNotAWorker() throws Exception
    {
        final SwitchMlControllerClient client = harness.client();
        assertThatThrownBy(() -> client.broadcast(1, 4, 4, 0))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("INVALID_ARGUMENT")
            .hasMessageContaining("rank 4 is not below num_workers 4");
        assertThatThrownBy(() -> client.broadcast(1, 0, 4, 4))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("root 4 is not below num_workers 4");
        assertThatThrownBy(() -> client.broadcast(1, -1, 4, 0))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("rank 4294967295 is not below num_workers 4");
        assertThatThrownBy(() -> client.broadcast(1, 0, 0, 0))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("num_workers must be 1 to 64, not 0");
        assertThatThrownBy(() -> client.broadcast(1, 0, 65, 0))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("num_workers must be 1 to 64, not 65");
        assertThat(client.broadcast(5, 0, 1, 0)).isEqualTo(5);
    }

    @Test
    void shouldRefuseABroadcastThatDisagreesWithItsRound() throws Exception
    {
        final Future<Long> waiting = broadcast(0, 1, 3, 0);
        ControllerHarness.await(() -> harness.controller.broadcastWaiting() == 1, "rank 1 waits");
        assertThatThrownBy(() -> harness.client().broadcast(5, 2, 4, 0))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("INVALID_ARGUMENT")
            .hasMessageContaining("a broadcast among 3 worker(s) from root 0");
        assertThatThrownBy(() -> harness.client().broadcast(5, 2, 3, 2))
            .isInstanceOf(StatusRuntimeException.class)
            .hasMessageContaining("rank 2 calls with num_workers 3 and root 2");
        assertThat(harness.client().broadcast(8, 0, 3, 0)).isEqualTo(8);
        assertThat(waiting.get(5, TimeUnit.SECONDS)).isEqualTo(8);
    }

    @Test
    void shouldBroadcastAmongSixtyFourWorkers() throws Exception
    {
        final SwitchMlControllerClient client = harness.client();
        for (int rank = 0; rank < 64; rank++)
        {
            assertThat(client.broadcast(rank + 1000, rank, 64, 0)).isEqualTo(1000);
        }
        assertThat(harness.controller.broadcastsCompleted()).isEqualTo(1);
    }

    @Test
    void shouldFailWaitingCallersWhenClosedAndStayClosed() throws Exception
    {
        final Future<Boolean> inBarrier = barrier(2);
        final Future<Long> inBroadcast = broadcast(0, 1, 2, 0);
        ControllerHarness.await(() -> harness.controller.barrierWaiting() == 1 &&
            harness.controller.broadcastWaiting() == 1, "a barrier caller and a broadcast caller wait");

        harness.controller.close();
        for (final Future<?> held : List.of(inBarrier, inBroadcast))
        {
            final Status status = statusOf(held);
            assertThat(status.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
            assertThat(status.getDescription()).isEqualTo("the SwitchML controller is shutting down");
        }

        harness.controller.close();
        assertThat(codeOf(barrier(1))).isEqualTo(Status.Code.UNAVAILABLE);
    }
}
