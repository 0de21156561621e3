package io.netreduce.host.rc;

import io.netreduce.protocol.wire.AethHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class QueuePairTest
{
    private static void fill(final MemoryRegion region, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        for (int i = 0; i < region.length(); i++)
        {
            region.buffer().putByte(i, (byte)random.nextInt());
        }
    }

    private static void assertSameBytes(final MemoryRegion actual, final int actualOffset, final MemoryRegion expected,
        final int expectedOffset, final int length)
    {
        final byte[] x = new byte[length];
        final byte[] y = new byte[length];
        actual.buffer().getBytes(actualOffset, x);
        expected.buffer().getBytes(expectedOffset, y);
        assertThat(x).isEqualTo(y);
    }

    private static WorkRequest write(final long wrId, final MemoryRegion src, final int offset, final int length,
        final MemoryRegion dst, final long dstOffset)
    {
        return new WorkRequest().wrId(wrId).opcode(WorkRequest.RDMA_WRITE).local(src, offset, length)
            .remote(dst.virtualAddress() + dstOffset, dst.rkey());
    }

    /** Decodes the request packets (opcode, psn) that go through a tap. */
    private static final class Recorder implements TestLink.Tap
    {
        final RoceFrame frame = new RoceFrame();
        final List<int[]> packets = new ArrayList<>();

        @Override
        public boolean onFrame(final UnsafeBuffer buffer, final int length)
        {
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK)
            {
                packets.add(new int[]{ frame.opcode(), frame.psn(), frame.ackRequest() ? 1 : 0,
                    frame.payloadLength() });
            }
            return true;
        }
    }

    @Test
    void shouldSegmentRdmaWriteByPmtuAndPlaceItByteExact()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(4096);
        final MemoryRegion dst = pair.b.registerMemory(8192);
        fill(src, 1);
        final Recorder recorder = new Recorder();
        pair.link.a.tap = recorder;

        assertThat(pair.qpA.postSend(write(7, src, 3, 1000, dst, 100))).isEqualTo(QueuePair.POST_OK);
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(pair.recordsA.getFirst()[0]).isEqualTo(7);
        assertThat(pair.recordsA.getFirst()[1]).isEqualTo(CompletionStatus.SUCCESS);
        assertSameBytes(dst, 100, src, 3, 1000);
        assertThat(dst.buffer().getByte(99)).isZero();
        assertThat(dst.buffer().getByte(1100)).isZero();
        assertThat(recorder.packets).extracting(p -> p[0]).containsExactly(
            Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_MIDDLE, Opcode.RDMA_WRITE_MIDDLE, Opcode.RDMA_WRITE_LAST);
        assertThat(recorder.packets).extracting(p -> p[3]).containsExactly(256, 256, 256, 232);
        assertThat(recorder.packets).extracting(p -> p[1]).containsExactly(100, 101, 102, 103);
        assertThat(recorder.packets).extracting(p -> p[2]).containsExactly(0, 0, 0, 1);
        assertThat(pair.qpB.expectedPsn()).isEqualTo(104);
    }

    @Test
    void shouldTellAnIdleLoopWhenItMustRunAgain()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256).retransmitTimeoutNs(5_000_000));
        final MemoryRegion src = pair.a.registerMemory(4096);
        final MemoryRegion dst = pair.b.registerMemory(8192);
        final long now = pair.clock.nanoTime();
        assertThat(pair.a.nextDeadlineNs(now)).as("nothing posted, nothing armed").isEqualTo(Long.MAX_VALUE);

        assertThat(pair.qpA.postSend(write(1, src, 0, 1000, dst, 0))).isEqualTo(QueuePair.POST_OK);
        assertThat(pair.a.nextDeadlineNs(now)).as("packets it may send now").isEqualTo(now);

        pair.a.doWork();
        final long sentAt = pair.clock.nanoTime();
        assertThat(pair.a.nextDeadlineNs(sentAt)).as("sent, unacknowledged: the retransmission timer")
            .isEqualTo(sentAt + 5_000_000);

        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);
        final long done = pair.clock.nanoTime();
        assertThat(pair.a.nextDeadlineNs(done)).as("acknowledged: nothing armed").isEqualTo(Long.MAX_VALUE);
    }

    @Test
    void shouldSetAckRequestAtLeastEverySixtyFourPacketsAndCoalesceAcks()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(256 * 200);
        final MemoryRegion dst = pair.b.registerMemory(256 * 200);
        fill(src, 2);
        final Recorder recorder = new Recorder();
        pair.link.a.tap = recorder;

        pair.qpA.postSend(write(1, src, 0, 256 * 200, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertSameBytes(dst, 0, src, 0, 256 * 200);
        int sinceAckRequest = 0;
        for (final int[] p : recorder.packets)
        {
            sinceAckRequest = p[2] == 1 ? 0 : sinceAckRequest + 1;
            assertThat(sinceAckRequest).isLessThan(64);
        }
        assertThat(recorder.packets.getLast()[2]).isEqualTo(1);
        assertThat(pair.qpB.counters().acksSent()).isLessThan(200 / 4);
    }

    @Test
    void shouldCarryInaHeaderAsFirstBytesOfFirstPacketPayload()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(1024));
        final MemoryRegion src = pair.a.registerMemory(3000);
        final MemoryRegion dst = pair.b.registerMemory(3000);
        fill(src, 3);
        InaHeader.write(src.buffer(), 0, 5, 9, 3, 1);
        final RoceFrame frame = new RoceFrame();
        final List<Integer> tags = new ArrayList<>();
        pair.link.a.tap = (buffer, length) ->
        {
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.opcode() == Opcode.RDMA_WRITE_FIRST)
            {
                tags.add(InaHeader.inetTag(buffer, frame.payloadOffset()));
                tags.add(InaHeader.msgId(buffer, frame.payloadOffset()));
            }
            return true;
        };

        pair.qpA.postSend(write(1, src, 0, 3000, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(tags).containsExactly(InaHeader.INET_TAG, 9);
        assertThat(InaHeader.inetTag(dst.buffer(), 0)).isEqualTo(InaHeader.INET_TAG);
        assertSameBytes(dst, 0, src, 0, 3000);
    }

    @Test
    void shouldDeliverSendWithImmediateIntoPostedReceive()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(512));
        final MemoryRegion src = pair.a.registerMemory(2000);
        final MemoryRegion rx = pair.b.registerMemory(4096);
        fill(src, 4);
        assertThat(pair.qpB.postRecv(41, rx, 64, 2048)).isEqualTo(QueuePair.POST_OK);

        pair.qpA.postSend(new WorkRequest().wrId(9).opcode(WorkRequest.SEND_WITH_IMM).local(src, 0, 1500)
            .immediate(0xCAFE));
        pair.runUntil(() -> pair.completionsA.size() == 1 && pair.completionsB.size() == 1, 1000);

        final long[] recv = pair.recordsB.getFirst();
        assertThat(recv).containsExactly(41, CompletionStatus.SUCCESS, Completion.OP_RECV, 1500, 1, 0xCAFE);
        assertThat(pair.recordsA.getFirst()).containsExactly(9, CompletionStatus.SUCCESS, Completion.OP_SEND,
            1500, 0, 0);
        assertSameBytes(rx, 64, src, 0, 1500);
        assertThat(pair.qpB.postedReceives()).isZero();
    }

    @Test
    void shouldConsumeReceiveForRdmaWriteWithImmediate()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(600);
        final MemoryRegion dst = pair.b.registerMemory(600);
        final MemoryRegion rx = pair.b.registerMemory(64);
        fill(src, 5);
        pair.qpB.postRecv(77, rx, 0, 64);

        pair.qpA.postSend(write(3, src, 0, 600, dst, 0).opcode(WorkRequest.RDMA_WRITE_WITH_IMM).immediate(12345));
        pair.runUntil(() -> pair.completionsB.size() == 1 && pair.completionsA.size() == 1, 1000);

        assertThat(pair.recordsB.getFirst()).containsExactly(77, CompletionStatus.SUCCESS,
            Completion.OP_RECV_RDMA_WITH_IMM, 600, 1, 12345);
        assertSameBytes(dst, 0, src, 0, 600);
        assertThat(rx.buffer().getLong(0)).isZero();
    }

    @Test
    void shouldReportHowManyOfAReceivedMessagesPacketsArrivedMarked()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(600);
        final MemoryRegion dst = pair.b.registerMemory(600);
        final MemoryRegion rx = pair.b.registerMemory(64);
        fill(src, 9);
        pair.qpB.postRecv(78, rx, 0, 64);
        final RoceFrame frame = new RoceFrame();
        final int[] requests = new int[1];
        pair.link.a.tap = (buffer, length) ->
        {
            // the first and the last of the message's three packets cross a congested hop
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.opcode() != Opcode.ACKNOWLEDGE &&
                requests[0]++ != 1)
            {
                Ipv4Header.tos(buffer, frame.l3Offset(), Ipv4Header.tos(buffer, frame.l3Offset()) | Ipv4Header.ECN_CE);
                Ipv4Header.updateChecksum(buffer, frame.l3Offset());
            }
            return true;
        };

        pair.qpA.postSend(write(4, src, 0, 600, dst, 0).opcode(WorkRequest.RDMA_WRITE_WITH_IMM).immediate(7));
        pair.runUntil(() -> pair.completionsB.size() == 1 && pair.completionsA.size() == 1, 1000);

        assertThat(requests[0]).isEqualTo(3);
        assertThat(pair.completionsB.getFirst()).contains("CE 2/3");
        assertThat(pair.qpB.counters().ecnMarked()).isEqualTo(2);
        assertSameBytes(dst, 0, src, 0, 600);
    }

    @Test
    void shouldRnrNakSendWithoutReceiveAndDeliverOnceReceiveIsPosted()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(700);
        final MemoryRegion rx = pair.b.registerMemory(1024);
        fill(src, 6);

        pair.qpA.postSend(new WorkRequest().wrId(1).opcode(WorkRequest.SEND).local(src, 0, 700));
        pair.run(50);
        assertThat(pair.qpB.counters().rnrNaksSent()).isGreaterThan(0);
        assertThat(pair.qpA.counters().rnrNaksReceived()).isGreaterThan(0);
        assertThat(pair.completionsA).isEmpty();

        pair.qpB.postRecv(2, rx, 0, 1024);
        pair.runUntil(() -> pair.completionsA.size() == 1 && pair.completionsB.size() == 1, 2000);
        assertThat(pair.recordsA.getFirst()[1]).isEqualTo(CompletionStatus.SUCCESS);
        assertSameBytes(rx, 0, src, 0, 700);
    }

    @Test
    void shouldNakOnceForGapAndRecoverByGoBackN()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final TraceRecorder trace = new TraceRecorder(16);
        pair.a.trace(trace);
        final MemoryRegion src = pair.a.registerMemory(256 * 40);
        final MemoryRegion dst = pair.b.registerMemory(256 * 40);
        fill(src, 7);
        final RoceFrame frame = new RoceFrame();
        final AtomicBoolean dropped = new AtomicBoolean();
        pair.link.a.tap = (buffer, length) ->
        {
            // lose the 6th request packet (PSN 105), once
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.psn() == 105 && !dropped.get())
            {
                dropped.set(true);
                return false;
            }
            return true;
        };

        pair.qpA.postSend(write(1, src, 0, 256 * 40, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(pair.recordsA.getFirst()[1]).isEqualTo(CompletionStatus.SUCCESS);
        assertSameBytes(dst, 0, src, 0, 256 * 40);
        assertThat(pair.qpB.counters().outOfSequence()).isGreaterThan(1);
        assertThat(pair.qpB.counters().naksSent()).isEqualTo(1);
        assertThat(pair.qpA.counters().naksReceived()).isEqualTo(1);
        assertThat(pair.qpA.counters().retransmittedPackets()).isGreaterThan(0);
        assertThat(pair.qpA.counters().timeouts()).isZero();
        assertThat(trace.size()).as("the trace: one go-back, triggered by the NAK").isEqualTo(1);
        assertThat(trace.kind(0)).isEqualTo(TraceRecorder.NAK);
    }

    @Test
    void shouldReAckDuplicatesWithoutReapplyingThem()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(1024);
        final MemoryRegion dst = pair.b.registerMemory(1024);
        fill(src, 8);
        final AtomicBoolean loseAcks = new AtomicBoolean(true);
        final RoceFrame frame = new RoceFrame();
        pair.link.b.tap = (buffer, length) ->
            !(loseAcks.get() && frame.wrap(buffer, 0, length) == RoceFrame.OK &&
                frame.opcode() == Opcode.ACKNOWLEDGE);

        pair.qpA.postSend(write(1, src, 0, 1024, dst, 0));
        pair.run(20);
        assertSameBytes(dst, 0, src, 0, 1024);
        assertThat(pair.completionsA).isEmpty();
        // The application reuses the buffer; a retransmitted duplicate must not overwrite it.
        dst.buffer().setMemory(0, 1024, (byte)0xEE);
        loseAcks.set(false);
        pair.stepNs = 100_000;
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(pair.recordsA.getFirst()[1]).isEqualTo(CompletionStatus.SUCCESS);
        assertThat(pair.qpA.counters().timeouts()).isGreaterThan(0);
        assertThat(pair.qpB.counters().duplicates()).isGreaterThan(0);
        for (int i = 0; i < 1024; i++)
        {
            assertThat(dst.buffer().getByte(i)).isEqualTo((byte)0xEE);
        }
    }

    @Test
    void shouldWrapPsnAroundTwentyFourBits()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256), new RcConfig().pmtu(256), 0xFF_FFF0, 0xFF_FFFE);
        final MemoryRegion srcA = pair.a.registerMemory(256 * 64);
        final MemoryRegion dstB = pair.b.registerMemory(256 * 64);
        final MemoryRegion srcB = pair.b.registerMemory(256 * 8);
        final MemoryRegion dstA = pair.a.registerMemory(256 * 8);
        fill(srcA, 9);
        fill(srcB, 10);
        final Recorder recorder = new Recorder();
        pair.link.a.tap = recorder;

        pair.qpA.postSend(write(1, srcA, 0, 256 * 64, dstB, 0));
        pair.qpB.postSend(write(2, srcB, 0, 256 * 8, dstA, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1 && pair.completionsB.size() == 1, 1000);

        assertSameBytes(dstB, 0, srcA, 0, 256 * 64);
        assertSameBytes(dstA, 0, srcB, 0, 256 * 8);
        assertThat(pair.qpB.expectedPsn()).isEqualTo(0x30);
        assertThat(pair.qpA.unackedPsn()).isEqualTo(0x30);
        assertThat(pair.qpA.expectedPsn()).isEqualTo(6);
        assertThat(recorder.packets).extracting(p -> p[1]).contains(0xFF_FFFF, 0);
    }

    @Test
    void shouldRecoverAcrossPsnWrapWithGoBackN()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256), new RcConfig().pmtu(256), 0xFF_FFFA, 0);
        final MemoryRegion src = pair.a.registerMemory(256 * 20);
        final MemoryRegion dst = pair.b.registerMemory(256 * 20);
        fill(src, 11);
        final RoceFrame frame = new RoceFrame();
        final AtomicBoolean dropped = new AtomicBoolean();
        pair.link.a.tap = (buffer, length) ->
        {
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.psn() == 0xFF_FFFE && !dropped.get())
            {
                dropped.set(true);
                return false;
            }
            return true;
        };
        pair.qpA.postSend(write(1, src, 0, 256 * 20, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);
        assertSameBytes(dst, 0, src, 0, 256 * 20);
        assertThat(pair.qpA.counters().naksReceived()).isEqualTo(1);
        assertThat(pair.qpB.expectedPsn()).isEqualTo(0x0E);
    }

    @Test
    void shouldReportRetryExhaustionAsErrorCompletionAfterExponentialBackoff()
    {
        final RcConfig config = new RcConfig().pmtu(256).retryCount(3).retransmitTimeoutNs(1_000_000);
        final RcPair pair = new RcPair(config);
        final TraceRecorder trace = new TraceRecorder(16);
        pair.a.trace(trace);
        final MemoryRegion src = pair.a.registerMemory(512);
        final MemoryRegion dst = pair.b.registerMemory(512);
        final List<Long> sendTimes = new ArrayList<>();
        pair.link.a.tap = (buffer, length) ->
        {
            sendTimes.add(pair.clock.nanoTime());
            return false; // the peer is gone
        };
        pair.stepNs = 10_000;

        pair.qpA.postSend(write(1, src, 0, 256, dst, 0));
        pair.qpA.postSend(write(2, src, 256, 256, dst, 256));
        pair.runUntil(() -> pair.completionsA.size() == 2, 10_000);

        assertThat(pair.recordsA.get(0)[1]).isEqualTo(CompletionStatus.RETRY_EXCEEDED);
        assertThat(pair.recordsA.get(1)[1]).isEqualTo(CompletionStatus.FLUSH_ERROR);
        assertThat(pair.qpA.state()).isEqualTo(QueuePair.STATE_ERROR);
        assertThat(pair.qpA.counters().timeouts()).isEqualTo(4);
        // 2 packets first, then 2 per retry: 1 + 3 retries
        assertThat(sendTimes).hasSize(8);
        final long t0 = sendTimes.get(0);
        final long g1 = sendTimes.get(2) - t0;
        final long g2 = sendTimes.get(4) - sendTimes.get(2);
        final long g3 = sendTimes.get(6) - sendTimes.get(4);
        assertThat(g1).isBetween(1_000_000L, 1_020_000L);
        assertThat(g2).isBetween(2_000_000L, 2_020_000L);
        assertThat(g3).isBetween(4_000_000L, 4_020_000L);
        assertThat(pair.qpA.postSend(write(3, src, 0, 1, dst, 0))).isEqualTo(QueuePair.POST_WRONG_STATE);
        assertThat(trace.size()).as("one traced go-back per timeout").isEqualTo((int)pair.qpA.counters().timeouts());
        for (int e = 0; e < trace.size(); e++)
        {
            assertThat(trace.kind(e)).isEqualTo(TraceRecorder.TIMEOUT);
        }
    }

    @Test
    void shouldNakBadRkeyWithRemoteAccessErrorAndFailTheWorkRequest()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(512);
        final MemoryRegion dst = pair.b.registerMemory(512);

        pair.qpA.postSend(write(1, src, 0, 100, dst, 0));
        pair.qpA.postSend(new WorkRequest().wrId(2).opcode(WorkRequest.RDMA_WRITE).local(src, 0, 100)
            .remote(dst.virtualAddress(), dst.rkey() ^ 0x5A5A));
        pair.qpA.postSend(write(3, src, 0, 100, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 3, 1000);

        assertThat(pair.recordsA).extracting(r -> r[1]).containsExactly((long)CompletionStatus.SUCCESS,
            (long)CompletionStatus.REMOTE_ACCESS_ERROR, (long)CompletionStatus.FLUSH_ERROR);
        assertThat(pair.qpB.counters().naksSent()).isEqualTo(1);
        assertThat(pair.qpB.state()).isEqualTo(QueuePair.STATE_ERROR);
    }

    @Test
    void shouldNakOutOfBoundsWriteWithRemoteAccessErrorAndPlaceNothing()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(1024);
        final MemoryRegion dst = pair.b.registerMemory(512);
        fill(src, 12);
        final AtomicInteger nakCode = new AtomicInteger(-1);
        final RoceFrame frame = new RoceFrame();
        pair.link.b.tap = (buffer, length) ->
        {
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.opcode() == Opcode.ACKNOWLEDGE)
            {
                final int syndrome = AethHeader.syndrome(buffer, frame.extensionOffset());
                if (AethHeader.type(syndrome) == AethHeader.TYPE_NAK)
                {
                    nakCode.set(AethHeader.code(syndrome));
                }
            }
            return true;
        };

        pair.qpA.postSend(write(1, src, 0, 600, dst, 0)); // 600 bytes into a 512-byte region
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(pair.recordsA.getFirst()[1]).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(nakCode.get()).isEqualTo(AethHeader.NAK_REMOTE_ACCESS_ERROR);
        for (int i = 0; i < 512; i++)
        {
            assertThat(dst.buffer().getByte(i)).isZero();
        }
    }

    @Test
    void shouldDropAndCountFrameWithBadIcrcThenRecover()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(256));
        final MemoryRegion src = pair.a.registerMemory(2048);
        final MemoryRegion dst = pair.b.registerMemory(2048);
        fill(src, 13);
        final RoceFrame frame = new RoceFrame();
        final AtomicBoolean corrupted = new AtomicBoolean();
        pair.link.a.tap = (buffer, length) ->
        {
            if (!corrupted.get() && frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.psn() == 102)
            {
                corrupted.set(true);
                final int at = frame.payloadOffset() + 17;
                buffer.putByte(at, (byte)(buffer.getByte(at) ^ 0x01)); // one bit flipped in flight
            }
            return true;
        };

        pair.qpA.postSend(write(1, src, 0, 2048, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);

        assertThat(pair.b.icrcErrors()).isEqualTo(1);
        assertThat(pair.qpB.counters().icrcErrors()).isEqualTo(1);
        assertSameBytes(dst, 0, src, 0, 2048);
    }

    @Test
    void shouldSendTheTrafficClassSetOnItAndCountCeAtTheResponder()
    {
        final RcPair pair = new RcPair(new RcConfig().pmtu(1024));
        final MemoryRegion src = pair.a.registerMemory(8192);
        final MemoryRegion dst = pair.b.registerMemory(8192);
        final RoceFrame frame = new RoceFrame();
        final List<Integer> tos = new ArrayList<>();
        pair.link.a.tap = (buffer, length) ->
        {
            if (frame.wrap(buffer, 0, length) == RoceFrame.OK)
            {
                tos.add(Ipv4Header.tos(buffer, frame.l3Offset()));
            }
            return true;
        };

        pair.qpA.postSend(write(1, src, 0, 2048, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 1, 1000);
        pair.qpA.trafficClass(0x2B); // DSCP 10, ECN CE: what a warm-up that stands for a congested hop sends
        pair.qpA.postSend(write(2, src, 0, 2048, dst, 0));
        pair.runUntil(() -> pair.completionsA.size() == 2, 1000);

        // the default ECT(0) first, then the class set; the ICRC masks the field, so the marked packets are taken
        assertThat(tos).containsExactly(0x02, 0x02, 0x2B, 0x2B);
        assertThat(pair.qpB.counters().ecnMarked()).isEqualTo(2);
        assertThat(pair.qpB.counters().icrcErrors()).isZero();
        assertSameBytes(dst, 0, src, 0, 2048);
    }

    @Test
    void shouldRefuseATrafficClassOutsideAByte()
    {
        final RcPair pair = new RcPair(new RcConfig());

        assertThatThrownBy(() -> pair.qpA.trafficClass(256))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("0..255");
    }

    @Test
    void shouldSendRateLimitedCnpForCeMarkedPacketsAndCutRequesterRate()
    {
        final RcConfig config = new RcConfig().pmtu(1024).lineRateBitsPerSecond(1_000_000_000L)
            .additiveIncreaseBitsPerSecond(10_000_000L);
        final RcPair pair = new RcPair(config);
        final MemoryRegion src = pair.a.registerMemory(1 << 20);
        final MemoryRegion dst = pair.b.registerMemory(1 << 20);
        final RoceFrame frame = new RoceFrame();
        final AtomicBoolean mark = new AtomicBoolean(true);
        pair.link.a.tap = (buffer, length) ->
        {
            if (mark.get() && frame.wrap(buffer, 0, length) == RoceFrame.OK && frame.opcode() != Opcode.CNP)
            {
                // a congested switch marks CE; the ICRC masks the TOS byte, so it stays valid
                Ipv4Header.tos(buffer, frame.l3Offset(), Ipv4Header.tos(buffer, frame.l3Offset()) | Ipv4Header.ECN_CE);
                Ipv4Header.updateChecksum(buffer, frame.l3Offset());
            }
            return true;
        };
        pair.stepNs = 1_000;

        pair.qpA.postSend(write(1, src, 0, 64 * 1024, dst, 0));
        pair.run(10); // 10 us: CE marks on every packet, but one CNP per 50 us
        assertThat(pair.qpB.counters().ecnMarked()).isGreaterThan(1);
        assertThat(pair.qpB.counters().cnpsSent()).isEqualTo(1);
        assertThat(pair.qpA.counters().cnpsReceived()).isEqualTo(1);
        assertThat(pair.qpA.rateLimiter().isLimiting()).isTrue();
        assertThat(pair.qpA.rateLimiter().currentRateBitsPerSecond()).isEqualTo(500_000_000L);
        pair.runUntil(() -> pair.completionsA.size() == 1, 10_000);

        // Now measure: with marks stopped the rate recovers, but right after a cut it is held near the cut rate.
        mark.set(false);
        pair.qpA.rateLimiter().onCongestionNotification(pair.clock.nanoTime());
        final long rateAfterCut = pair.qpA.rateLimiter().currentRateBitsPerSecond();
        final long before = pair.qpA.counters().bytesSent();
        pair.qpA.postSend(write(2, src, 0, 1 << 20, dst, 0));
        pair.run(50); // 50 us, less than one increase step
        final long sentBits = (pair.qpA.counters().bytesSent() - before) * 8;
        final long allowedBits = rateAfterCut * 50_000 / 1_000_000_000L + config.rateBurstBytes() * 8L + 8 * 1100;
        assertThat(sentBits).isLessThanOrEqualTo(allowedBits);
        pair.runUntil(() -> pair.completionsA.size() == 2, 200_000);
        assertThat(pair.qpA.rateLimiter().currentRateBitsPerSecond()).isGreaterThan(rateAfterCut);
    }

    @Test
    void shouldMoveManyMessagesByteExactUnderRandomLossBothWays()
    {
        final RcConfig config = new RcConfig().pmtu(512).sendDropProbability(0.02).receiveDropProbability(0.02)
            .retransmitTimeoutNs(200_000);
        final RcPair pair = new RcPair(config);
        final int size = 5000;
        final int messages = 64;
        final MemoryRegion src = pair.a.registerMemory(size * messages);
        final MemoryRegion dst = pair.b.registerMemory(size * messages);
        final MemoryRegion rx = pair.b.registerMemory(size * messages);
        fill(src, 14);
        for (int i = 0; i < messages; i++)
        {
            pair.qpB.postRecv(1000 + i, rx, i * size, size);
        }
        for (int i = 0; i < messages; i++)
        {
            final WorkRequest wr = i % 2 == 0 ? write(i, src, i * size, size, dst, (long)i * size) :
                new WorkRequest().wrId(i).opcode(WorkRequest.SEND).local(src, i * size, size);
            assertThat(pair.qpA.postSend(wr)).isEqualTo(QueuePair.POST_OK);
        }
        pair.stepNs = 5_000;
        pair.runUntil(() -> pair.completionsA.size() == messages, 200_000);

        assertThat(pair.recordsA).allSatisfy(r -> assertThat(r[1]).isEqualTo(CompletionStatus.SUCCESS));
        assertThat(pair.recordsA).extracting(r -> r[0]).isSorted();
        assertThat(pair.recordsB).hasSize(messages / 2);
        for (int i = 0; i < messages; i++)
        {
            if (i % 2 == 0)
            {
                assertSameBytes(dst, i * size, src, i * size, size);
            }
        }
        for (int k = 0; k < messages / 2; k++)
        {
            final int i = 2 * k + 1;
            assertThat(pair.recordsB.get(k)[0]).isEqualTo(1000 + k);
            assertSameBytes(rx, k * size, src, i * size, size);
        }
        assertThat(pair.a.faults().sendDrops() + pair.b.faults().receiveDrops()).isGreaterThan(0);
        assertThat(pair.qpA.counters().retransmittedPackets()).isGreaterThan(0);
    }

    @Test
    void shouldRefuseInvalidPosts()
    {
        final RcPair pair = new RcPair(new RcConfig().sendQueueDepth(2));
        final MemoryRegion src = pair.a.registerMemory(100);
        assertThat(pair.qpA.postSend(new WorkRequest().local(src, 50, 51))).isEqualTo(QueuePair.POST_INVALID);
        assertThat(pair.qpA.postSend(new WorkRequest().local(null, 0, 1))).isEqualTo(QueuePair.POST_INVALID);
        assertThat(pair.qpA.postSend(new WorkRequest().local(src, 0, 1))).isEqualTo(QueuePair.POST_OK);
        assertThat(pair.qpA.postSend(new WorkRequest().local(src, 0, 1))).isEqualTo(QueuePair.POST_OK);
        assertThat(pair.qpA.postSend(new WorkRequest().local(src, 0, 1))).isEqualTo(QueuePair.POST_QUEUE_FULL);
        assertThat(pair.qpB.postRecv(1, src, 99, 2)).isEqualTo(QueuePair.POST_INVALID);
    }
}
