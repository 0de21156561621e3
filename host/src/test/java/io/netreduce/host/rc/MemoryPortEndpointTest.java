package io.netreduce.host.rc;

import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.MemoryPort;
import org.agrona.concurrent.CachedNanoClock;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

class MemoryPortEndpointTest
{
    @Test
    void shouldGiveOutQpNumbersFromTheConfiguredFirstSoThatTwoEndpointsOnOneInterfaceDoNotShareOne()
    {
        final MemoryPort port = new MemoryPort("a");
        final CachedNanoClock clock = new CachedNanoClock();
        final RcEndpoint plain = new RcEndpoint(port, new RcConfig(), clock, RcPair.ip("10.0.0.1"), RcPair.MAC_A);
        final RcEndpoint second = new RcEndpoint(new MemoryPort("b"), new RcConfig().firstQpn(0x10_0011), clock,
            RcPair.ip("10.0.0.1"), RcPair.MAC_A);
        final CompletionQueue cq = new CompletionQueue(8);

        assertThat(plain.createQueuePair(cq, cq).qpn()).isEqualTo(0x11);
        assertThat(plain.createQueuePair(cq, cq).qpn()).isEqualTo(0x12);
        assertThat(second.createQueuePair(cq, cq).qpn()).isEqualTo(0x10_0011);
        assertThat(second.createQueuePair(cq, cq).qpn()).isEqualTo(0x10_0012);
    }

    @Test
    void shouldAskItsPortForItsOwnQueuePairsOnlyEachTimeItMakesOne()
    {
        // As an RDMA NIC hands a QP only its packets: the kernel filters an AF_PACKET port by these numbers.
        final TestLink link = new TestLink();
        final CachedNanoClock clock = new CachedNanoClock();
        final RcEndpoint endpoint = new RcEndpoint(link.a, new RcConfig().firstQpn(0x311), clock,
            RcPair.ip("10.0.0.1"), RcPair.MAC_A);
        final CompletionQueue cq = new CompletionQueue(8);
        assertThat(endpoint.portFiltersQueuePairs()).as("no queue pair yet").isFalse();
        endpoint.createQueuePair(cq, cq);
        assertThat(link.a.queuePairsAsked).containsExactly(0x311);
        endpoint.createQueuePair(0x999, cq, cq);
        endpoint.createQueuePair(cq, cq);
        assertThat(link.a.queuePairsAsked).containsExactly(0x311, 0x999, 0x312);
        assertThat(endpoint.portFiltersQueuePairs()).isTrue();

        final RcEndpoint onMemory = new RcEndpoint(new MemoryPort("m"), new RcConfig(), clock, RcPair.ip("10.0.0.1"),
            RcPair.MAC_A);
        onMemory.createQueuePair(cq, cq);
        assertThat(onMemory.portFiltersQueuePairs()).as("a memory port cannot filter").isFalse();
    }

    @Test
    void shouldMoveWritesAndSendsByteExactOverWiredMemoryPorts()
    {
        final MemoryPort portA = new MemoryPort("a");
        final MemoryPort portB = new MemoryPort("b");
        MemoryPort.wire(portA, portB);
        final CachedNanoClock clock = new CachedNanoClock();
        final RcConfig config = new RcConfig().pmtu(4096);
        final RcEndpoint a = new RcEndpoint(portA, config, clock, RcPair.ip("10.0.0.1"), RcPair.MAC_A);
        final RcEndpoint b = new RcEndpoint(portB, config, clock, RcPair.ip("10.0.0.2"), RcPair.MAC_B);
        final CompletionQueue cqA = new CompletionQueue(64);
        final CompletionQueue cqB = new CompletionQueue(64);
        final QueuePair qpA = a.createQueuePair(cqA, cqA);
        final QueuePair qpB = b.createQueuePair(cqB, cqB);
        final MemoryRegion src = a.registerMemory(1 << 20);
        final MemoryRegion dst = b.registerMemory(1 << 20);
        final MemoryRegion rx = b.registerMemory(1 << 20);
        final SplittableRandom random = new SplittableRandom(3);
        for (int i = 0; i < src.length(); i++)
        {
            src.buffer().putByte(i, (byte)random.nextInt());
        }
        qpA.connect(qpB.localInfo(dst));
        qpB.connect(qpA.localInfo(src));
        qpB.postRecv(5, rx, 0, 1 << 20);

        qpA.postSend(new WorkRequest().wrId(1).opcode(WorkRequest.RDMA_WRITE).local(src, 0, 1 << 20)
            .remote(dst.virtualAddress(), dst.rkey()));
        qpA.postSend(new WorkRequest().wrId(2).opcode(WorkRequest.SEND_WITH_IMM).local(src, 0, 300_001)
            .immediate(99));
        final int[] sends = new int[1];
        final int[] recvs = new int[1];
        for (int i = 0; i < 100_000 && (sends[0] < 2 || recvs[0] < 1); i++)
        {
            clock.advance(1_000);
            a.doWork();
            b.doWork();
            cqA.poll(c -> sends[0] += c.isSuccess() ? 1 : 100, 8);
            cqB.poll(c -> recvs[0] += c.isSuccess() && c.immediate() == 99 && c.byteLength() == 300_001 ? 1 : 100, 8);
        }

        assertThat(sends[0]).isEqualTo(2);
        assertThat(recvs[0]).isEqualTo(1);
        final byte[] expected = new byte[1 << 20];
        final byte[] actual = new byte[1 << 20];
        src.buffer().getBytes(0, expected);
        dst.buffer().getBytes(0, actual);
        assertThat(actual).isEqualTo(expected);
        final byte[] received = new byte[300_001];
        final byte[] sent = new byte[300_001];
        rx.buffer().getBytes(0, received);
        src.buffer().getBytes(0, sent);
        assertThat(received).isEqualTo(sent);
        assertThat(qpA.counters().retransmittedPackets()).isZero();
    }

    @Test
    void shouldTakeNoVlanTaggedFrameAsItsQueuePairsEvenWithThePeersAddresses()
    {
        // Issue 30: on the bed, 802.1Q and QinQ frames with rank 0's addresses went past the switch's redirect to
        // rank 1, whose endpoint took them for rank 0's packets (6,340 out of sequence, NAKs to the real rank 0).
        // An untagged interface's endpoint takes no tagged frame, whether the tag is in the bytes or the port's
        // kernel took it off (FLAG_VLAN_TAG_STRIPPED); the same frame untagged is its own.
        final MemoryPort portA = new MemoryPort("a");
        final MemoryPort portB = new MemoryPort("b");
        final CachedNanoClock clock = new CachedNanoClock();
        final RcConfig config = new RcConfig().pmtu(1024);
        final RcEndpoint a = new RcEndpoint(portA, config, clock, RcPair.ip("10.0.0.1"), RcPair.MAC_A);
        final RcEndpoint b = new RcEndpoint(portB, config, clock, RcPair.ip("10.0.0.2"), RcPair.MAC_B);
        final CompletionQueue cqA = new CompletionQueue(64);
        final CompletionQueue cqB = new CompletionQueue(64);
        final QueuePair qpA = a.createQueuePair(cqA, cqA);
        final QueuePair qpB = b.createQueuePair(cqB, cqB);
        final MemoryRegion src = a.registerMemory(4096);
        final MemoryRegion dst = b.registerMemory(4096);
        qpA.connect(qpB.localInfo(dst));
        qpB.connect(qpA.localInfo(src));
        qpA.postSend(new WorkRequest().wrId(1).opcode(WorkRequest.RDMA_WRITE).local(src, 0, 512)
            .remote(dst.virtualAddress(), dst.rkey()));
        a.doWork();
        final byte[] frame = portA.drainSent().getFirst();

        portB.inject(withTag(frame, 0x8100, 5));
        portB.inject(withTag(withTag(frame, 0x8100, 5), 0x88A8, 7));
        portB.inject(frame, FrameHandler.FLAG_VLAN_TAG_STRIPPED);
        b.doWork();
        assertThat(b.notForUs()).as("tagged frames refused").isEqualTo(3);
        assertThat(qpB.counters().packetsReceived()).isZero();

        portB.inject(frame);
        b.doWork();
        assertThat(b.notForUs()).isEqualTo(3);
        assertThat(qpB.counters().packetsReceived()).as("the same frame untagged").isEqualTo(1);
    }

    /** The frame with a tag (TPID, VLAN id) inserted after the two MACs, outside any tag it has. */
    private static byte[] withTag(final byte[] frame, final int tpid, final int vlan)
    {
        final byte[] tagged = new byte[frame.length + 4];
        System.arraycopy(frame, 0, tagged, 0, 12);
        tagged[12] = (byte)(tpid >>> 8);
        tagged[13] = (byte)tpid;
        tagged[14] = (byte)(vlan >>> 8);
        tagged[15] = (byte)vlan;
        System.arraycopy(frame, 12, tagged, 16, frame.length - 12);
        return tagged;
    }
}
