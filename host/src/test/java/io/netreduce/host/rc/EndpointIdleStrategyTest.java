package io.netreduce.host.rc;

import io.netreduce.protocol.wire.RoceFrame;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class EndpointIdleStrategyTest
{
    private static final long ACK_DELAY_NS = 10_000_000L;

    /**
     * Two endpoints where B has taken the first packets of a message and is coalescing their ACK: the message's last
     * packet (which asks for an ACK) is held back on the link, and the coalescing delay is long (10 ms) against a
     * clock that does not move.
     */
    private static RcPair pairWithCoalescedAckPending()
    {
        final RcConfig config = new RcConfig().pmtu(256).ackCoalescePackets(64).ackCoalesceDelayNs(ACK_DELAY_NS);
        final RcPair pair = new RcPair(config);
        final MemoryRegion src = pair.a.registerMemory(4096);
        final MemoryRegion dst = pair.b.registerMemory(4096);
        final RoceFrame frame = new RoceFrame();
        pair.link.a.tap = (buffer, length) -> frame.wrap(buffer, 0, length) != RoceFrame.OK || !frame.ackRequest();
        assertThat(pair.qpA.postSend(new WorkRequest().wrId(1).opcode(WorkRequest.RDMA_WRITE).local(src, 0, 1000)
            .remote(dst.virtualAddress(), dst.rkey()))).isEqualTo(QueuePair.POST_OK);
        pair.a.doWork();
        assertThat(pair.b.doWork()).as("B took the packets before the last").isPositive();
        assertThat(pair.qpB.expectedPsn()).isEqualTo(pair.qpA.unackedPsn() + 3);
        assertThat(pair.qpB.counters().acksSent()).isZero();
        return pair;
    }

    @Test
    void shouldSendACoalescedAckOnceTheLoopWouldWaitInsteadOfYieldingUntilItsDelayRunsOut()
    {
        final RcPair pair = pairWithCoalescedAckPending();
        final EndpointIdleStrategy idle = pair.b.idleStrategy();
        final long now = pair.clock.nanoTime();
        assertThat(pair.b.nextDeadlineNs(now)).as("the coalesced ACK's deadline").isEqualTo(now + ACK_DELAY_NS);

        for (int i = 0; i < EndpointIdleStrategy.DEFAULT_SPINS + EndpointIdleStrategy.DEFAULT_YIELDS; i++)
        {
            idle.idle(pair.b.doWork());
        }
        assertThat(pair.qpB.counters().acksSent()).as("still coalescing while the loop spins and yields").isZero();
        assertThat(idle.expeditedAcks()).isZero();

        idle.idle(pair.b.doWork()); // the loop would now wait: the ACK is made due
        assertThat(idle.expeditedAcks()).isEqualTo(1);
        assertThat(pair.b.doWork()).as("the next duty cycle sends it").isPositive();
        assertThat(pair.qpB.counters().acksSent()).isEqualTo(1);
        assertThat(pair.clock.nanoTime()).as("long before its delay ran out").isEqualTo(now);
        assertThat(pair.b.nextDeadlineNs(now)).as("nothing left to wait for").isEqualTo(Long.MAX_VALUE);

        pair.a.doWork();
        assertThat(pair.qpA.counters().acksReceived()).as("A has the ACK for the packets B took").isEqualTo(1);
        assertThat(idle.yields()).as("two yields, none spent waiting for the ACK")
            .isEqualTo(EndpointIdleStrategy.DEFAULT_YIELDS);
    }

    /**
     * The coalescing delay's test is arithmetic, not a branch (Responder.coalescedAckDue): it must still hold the
     * ACK until the delay has run out to the nanosecond, and send it then.
     */
    @Test
    void shouldSendACoalescedAckWhenItsDelayRunsOutAndNotANanosecondBefore()
    {
        final RcPair pair = pairWithCoalescedAckPending();
        pair.clock.advance(ACK_DELAY_NS - 1);
        pair.b.doWork();
        assertThat(pair.qpB.counters().acksSent()).as("a nanosecond before its delay ran out").isZero();

        pair.clock.advance(1);
        assertThat(pair.b.doWork()).isPositive();
        assertThat(pair.qpB.counters().acksSent()).as("its delay ran out").isEqualTo(1);
        pair.clock.advance(10 * ACK_DELAY_NS);
        pair.b.doWork();
        assertThat(pair.qpB.counters().acksSent()).as("nothing pending any more").isEqualTo(1);
        pair.a.doWork();
        assertThat(pair.qpA.counters().acksReceived()).isEqualTo(1);
    }

    @Test
    void shouldNotSendAnAckEarlyWhileTheLoopIsStillBusy()
    {
        final RcPair pair = pairWithCoalescedAckPending();
        final EndpointIdleStrategy idle = pair.b.idleStrategy();
        for (int i = 0; i < 100; i++)
        {
            idle.idle(1); // work found every duty cycle: the loop never goes idle
            pair.b.doWork();
        }
        assertThat(pair.qpB.counters().acksSent()).isZero();
        assertThat(idle.expeditedAcks()).isZero();
    }
}
