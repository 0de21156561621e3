package io.netreduce.dataplane.frame;

import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.wire.Ecn;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class ArrivingFrameTest
{
    private static final int MARK_AT = 4;

    private final MemoryPort port = new MemoryPort("p0");
    private final ArrivingFrame arriving = new ArrivingFrame();

    private void queue(final int frames)
    {
        for (int i = 0; i < frames; i++)
        {
            assertThat(port.inject(new byte[64])).isTrue();
        }
    }

    /**
     * The dataplane begins a batch on every turn, most of them on an empty port: the queue is looked at when the
     * batch's first ECN-capable packet asks, and the answer holds for the rest of the batch.
     */
    @Test
    void shouldLookAtTheReceiveQueueWhenAPacketAsksNotWhenTheBatchBegins()
    {
        arriving.beginBatch(0, 1L, port, MARK_AT);
        queue(MARK_AT);
        assertThat(arriving.queueMarks(Ecn.ECT_0)).as("the queue held the threshold when asked").isTrue();
        port.receive((buffer, offset, length, flags) -> { }, 2 * MARK_AT);
        assertThat(port.receiveBacklogAtLeast(1)).isFalse();
        assertThat(arriving.queueMarks(Ecn.ECT_1)).as("once per batch").isTrue();

        arriving.beginBatch(0, 2L, port, MARK_AT);
        assertThat(arriving.queueMarks(Ecn.ECT_0)).as("a new batch, the queue empty").isFalse();
        queue(MARK_AT);
        assertThat(arriving.queueMarks(Ecn.ECT_0)).as("answered for this batch already").isFalse();
    }

    @Test
    void shouldNeverMarkAPacketThatIsNotEcnCapableOrMarkedAlreadyNorMarkWhenMarkingIsOff()
    {
        queue(2 * MARK_AT);
        arriving.beginBatch(0, 1L, port, MARK_AT);
        assertThat(arriving.queueMarks(Ecn.NOT_ECT)).isFalse();
        assertThat(arriving.queueMarks(Ecn.CE)).isFalse();
        assertThat(arriving.queueMarks(Ecn.ECT_0)).isTrue();

        arriving.beginBatch(0, 2L, port, 0);
        assertThat(arriving.queueMarks(Ecn.ECT_0)).isFalse();
    }
}
