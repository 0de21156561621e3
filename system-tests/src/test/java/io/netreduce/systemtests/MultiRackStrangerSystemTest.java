package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 30 item 6: a stranger on the multi-rack bed ({@code testbed.sh --racks 2 --outsider}: a host on rack 0's
 * switch, in no ring). A UDP 4791 frame to a MAC no switch knows, or to the broadcast MAC, is passed on by the leaf
 * once and stays in its rack: it used to loop leaf, spine, every leaf, spine, for ever. The flat bed's crafted
 * frames, sent from the outsider while the ring (2 x 2) all-reduces: a member's address with the outsider's MAC, its
 * own address claiming a rank, forged partials ({@code NRPT}) on the leaving connection's QP and on another QP,
 * forged spine results ({@code NRES}), results the spine really sent replayed, and a member's frame with a bad ICRC;
 * each a counted drop at the appliance that sees it, no call fails, every sum is the hierarchy's exact sum.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class MultiRackStrangerSystemTest
{
    private static final int RING = 7;
    private static final int WORLD = 4;
    private static final int RACKS = 2;
    private static final int WINDOW = 8;
    private static final int MSG_LEN = 4;
    private static final int PMTU = 1024;
    private static final long OUTSIDER_MAC = 0x02_77_00_00_00_64L;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.upRacks('x', WORLD, RACKS, 1500, true);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    /** The leaves (rack order), then the spine. */
    private static Appliance[] start()
    {
        final String jobs = Appliance.racksJob("racks", RING, "fp32", WORLD, RACKS, WINDOW, MSG_LEN, PMTU);
        final Appliance[] appliances = new Appliance[RACKS + 1];
        try
        {
            for (int k = 0; k < RACKS; k++)
            {
                appliances[k] = Appliance.start(bed.leafNamespace(k), bed.mtu(), Appliance.leafName(k), 0.0, jobs);
            }
            appliances[RACKS] = Appliance.start(bed.spineNamespace(), bed.mtu(), "spine", 0.0, jobs);
        }
        catch (final RuntimeException ex)
        {
            close(appliances);
            throw ex;
        }
        return appliances;
    }

    private static void close(final Appliance[] appliances)
    {
        for (final Appliance appliance : appliances)
        {
            if (appliance != null)
            {
                appliance.close();
            }
        }
    }

    @Test
    void shouldKeepAFrameToAnUnknownMacOrToEveryoneInTheRackItCameFrom()
    {
        final Appliance[] appliances = start();
        final AfPacketPort[] taps = new AfPacketPort[RACKS + 1];
        try (AfPacketPort outsider = WorkerRing.openPort(bed.outsiderNamespace()))
        {
            for (int k = 0; k < RACKS; k++)
            {
                taps[k] = WorkerRing.openPort(bed.leafNamespace(k));
            }
            taps[RACKS] = WorkerRing.openPort(bed.spineNamespace());
            // UDP 4791 from the outsider to an address of no ring: to a MAC no switch knows, and to everyone.
            final InetAddress nowhere = TestBed.address("10.77.0.200");
            final RoceFrameWriter writer = new RoceFrameWriter()
                .ipv4(ipv4(TestBed.address(TestBed.OUTSIDER_IP)), ipv4(nowhere))
                .destQp(0x77).reth(0x1000, 0x1234, 64);
            final UnsafeBuffer buffer = new UnsafeBuffer(new byte[256]);
            final UnsafeBuffer payload = new UnsafeBuffer(new byte[64]);
            for (final long dstMac : new long[] { 0x02_99_00_00_00_01L, 0xFFFF_FFFF_FFFFL })
            {
                writer.macs(OUTSIDER_MAC, dstMac);
                final int length = writer.write(buffer, 0, io.netreduce.protocol.wire.Opcode.RDMA_WRITE_ONLY, 5,
                    true, payload, 0, 64);
                assertThat(outsider.send(buffer, 0, length)).isTrue();
            }
            outsider.flush();
            // What reaches each appliance's port in 1.5 s: a loop would bring the frames round again and again.
            final long[] seen = new long[taps.length];
            final RoceFrame parsed = new RoceFrame();
            final long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
            while (System.nanoTime() < end)
            {
                for (int k = 0; k < taps.length; k++)
                {
                    final int tap = k;
                    taps[k].receive((frame, offset, length, flags) ->
                    {
                        if (parsed.wrap(frame, offset, length) == RoceFrame.OK && parsed.ipVersion() == 4 &&
                            frame.getByte(parsed.dstAddressOffset() + 3) == (byte)200)
                        {
                            seen[tap]++;
                        }
                    }, 64);
                }
                Thread.onSpinWait();
            }
            System.out.printf("frames to the unknown MAC and to everyone, in 1.5 s: at leaf-a %d, leaf-b %d, " +
                "spine %d%n", seen[0], seen[1], seen[RACKS]);
            assertThat(seen[0]).as("leaf-a: each frame once").isEqualTo(2);
            assertThat(seen[RACKS]).as("the spine: never").isZero();
            assertThat(seen[1]).as("leaf-b: never").isZero();
        }
        finally
        {
            for (final AfPacketPort tap : taps)
            {
                if (tap != null)
                {
                    tap.close();
                }
            }
            close(appliances);
        }
    }

    /** The crafted frames, each the first packet of a message (one frame, one counted drop). */
    enum Crafted
    {
        /** Rank 1's address and first packet towards rank 2's receive QP, the outsider's MAC: leaf-a. */
        MEMBER_ADDRESS,
        /** The outsider's own address claiming rank 0: leaf-a. */
        OWN_ADDRESS,
        /** A partial ({@code NRPT}) on rack 0's leaving connection (1 -> 2, rank 2's receive QP): leaf-a. */
        PARTIAL,
        /** A partial on 1 -> 2 to another QP: passed on by leaf-a as no ring's, refused by the spine. */
        PARTIAL_OTHER_QP,
        /** A spine result ({@code NRES}) on rack 0's entering connection (3 -> 0), the outsider's MAC: leaf-a. */
        RESULT,
        /** Results the spine sent to leaf-a in the previous call, replayed byte for byte: leaf-a. */
        REPLAYED_RESULT,
        /** Rank 0's addresses and MAC, a bad ICRC: leaf-a. */
        BAD_ICRC
    }

    @Test
    void shouldCountEveryCraftedFrameFromAStrangerAsADropAndKeepEverySumExact()
    {
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PMTU, TimeUnit.SECONDS.toNanos(10));
        final int elements = (int)(100.5 * config.dataBytesPerMessage()) / Float.BYTES;
        final int[] rackFirst = { 0, WORLD / RACKS };
        final Appliance[] appliances = start();
        try (WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PMTU)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes());
            AfPacketPort outsider = WorkerRing.openPort(bed.outsiderNamespace());
            AfPacketPort leafTap = WorkerRing.openPort(bed.leafNamespace(0)))
        {
            final AllReduce[] ops = new AllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            final Stranger stranger = new Stranger(outsider, ring);
            final IntSupplier record = () -> leafTap.receive((buffer, offset, length, flags) ->
                stranger.recordIfSpineResult(buffer, offset, length), 64);
            final Map<DataplaneCounter, long[]> before = new EnumMap<>(DataplaneCounter.class);
            for (int call = 0; call < 3; call++)
            {
                // Call 0 binds the members' MACs (and the leaves' spine MAC); call 1 records the spine's results
                // to leaf-a for the replay, while the stranger sends what it can already craft; call 2 replays too.
                final IntSupplier extra = switch (call)
                {
                    case 0 -> () -> 0;
                    case 1 -> () -> record.getAsInt() + stranger.getAsInt();
                    default -> stranger;
                };
                if (call == 1)
                {
                    for (final DataplaneCounter counter : DataplaneCounter.values())
                    {
                        if (counter.isDrop())
                        {
                            final long[] values = new long[appliances.length];
                            for (int k = 0; k < appliances.length; k++)
                            {
                                values[k] = appliances[k].counter(counter);
                            }
                            before.put(counter, values);
                        }
                    }
                }
                final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, extra, TimeUnit.SECONDS.toNanos(60));
                if (!outcome.allSucceeded())
                {
                    assertThat(outcome.allSucceeded()).as("call %d:%s%ncrafted frames sent: %s%ncounters:%s", call,
                        outcome.describe(), stranger.sent(), nonZero(appliances)).isTrue();
                }
                assertThat(ring.checkSum(tensors, call, rackFirst)).as("call %d", call).isNull();
            }
            final StringBuilder drops = new StringBuilder();
            long counted = 0;
            for (final Map.Entry<DataplaneCounter, long[]> entry : before.entrySet())
            {
                for (int k = 0; k < appliances.length; k++)
                {
                    final long delta = appliances[k].counter(entry.getKey()) - entry.getValue()[k];
                    if (delta != 0)
                    {
                        drops.append(String.format("%n  %s %s %d", k < RACKS ? Appliance.leafName(k) : "spine",
                            entry.getKey().reason(), delta));
                        counted += delta;
                    }
                }
            }
            System.out.printf("crafted frames sent: %s; drops counted in calls 1-2: %d%s%n", stranger.sent(), counted,
                drops);
            for (final Crafted kind : Crafted.values())
            {
                assertThat(stranger.sent().get(kind)).as("%s sent", kind).isPositive();
            }
            final long leafMac = delta(appliances, before, DataplaneCounter.DROP_MAC_MISMATCH, 0);
            assertThat(leafMac).as("leaf-a mac_mismatch (a member's address, a forged result)")
                .isGreaterThanOrEqualTo(stranger.sent().get(Crafted.MEMBER_ADDRESS) +
                    stranger.sent().get(Crafted.RESULT));
            assertThat(delta(appliances, before, DataplaneCounter.DROP_SPOOFED, 0)).as("leaf-a spoofed")
                .isGreaterThanOrEqualTo(stranger.sent().get(Crafted.OWN_ADDRESS));
            assertThat(delta(appliances, before, DataplaneCounter.DROP_MISSING_INA_HEADER, 0))
                .as("leaf-a: a partial on a ring connection").isGreaterThanOrEqualTo(stranger.sent().get(Crafted.PARTIAL));
            assertThat(delta(appliances, before, DataplaneCounter.DROP_MAC_MISMATCH, RACKS))
                .as("spine mac_mismatch: a partial on another QP")
                .isGreaterThanOrEqualTo(stranger.sent().get(Crafted.PARTIAL_OTHER_QP));
            // Replays: not awaited, or on the connection's sequence and too old, or (from 128 or more messages
            // back, with the MsgID of an awaited result) off the sequence in the run the connection was learned in.
            assertThat(delta(appliances, before, DataplaneCounter.DROP_DOWN_NOT_AWAITED, 0) +
                delta(appliances, before, DataplaneCounter.DROP_STALE_PACKET, 0) +
                delta(appliances, before, DataplaneCounter.DROP_DOWN_OFF_SEQUENCE, 0))
                .as("leaf-a: replayed results").isGreaterThanOrEqualTo(stranger.sent().get(Crafted.REPLAYED_RESULT));
            assertThat(delta(appliances, before, DataplaneCounter.DROP_BAD_ICRC, 0)).as("leaf-a bad_icrc")
                .isGreaterThanOrEqualTo(stranger.sent().get(Crafted.BAD_ICRC));
            long sent = 0;
            for (final long each : stranger.sent().values())
            {
                sent += each;
            }
            assertThat(counted).as("drops counted, every appliance, every reason").isGreaterThanOrEqualTo(sent);
        }
        finally
        {
            close(appliances);
        }
    }

    /** Every appliance's counters that are not zero, for a failure's message. */
    private static String nonZero(final Appliance[] appliances)
    {
        final StringBuilder text = new StringBuilder();
        for (int k = 0; k < appliances.length; k++)
        {
            text.append(String.format("%n  %s:", k < RACKS ? Appliance.leafName(k) : "spine"));
            for (final Map.Entry<String, Long> counter : appliances[k].counters().entrySet())
            {
                if (counter.getValue() != 0)
                {
                    text.append(' ').append(counter.getKey().length() > 40 ? counter.getKey().substring(0, 40) :
                        counter.getKey()).append('=').append(counter.getValue());
                }
            }
        }
        return text.toString();
    }

    private static long delta(final Appliance[] appliances, final Map<DataplaneCounter, long[]> before,
        final DataplaneCounter counter, final int appliance)
    {
        return appliances[appliance].counter(counter) - before.get(counter)[appliance];
    }

    /**
     * The outsider's sender: one crafted frame every 1 ms (every 0.1 ms starved the rings into RETRY_EXCEEDED on a loaded 2-core bed), the kinds in turn (replays once some are recorded).
     */
    private static final class Stranger implements IntSupplier
    {
        private final AfPacketPort port;
        private final Map<Crafted, Long> sent = new EnumMap<>(Crafted.class);
        private final Map<Crafted, RingWorker> crafters = new EnumMap<>(Crafted.class);
        private final List<byte[]> recorded = new ArrayList<>();
        private final byte[] poison;
        private final UnsafeBuffer frame = new UnsafeBuffer(new byte[0]);
        private final RoceFrame parsed = new RoceFrame();
        private long lastNs = System.nanoTime();
        private long next;

        Stranger(final AfPacketPort port, final WorkerRing ring)
        {
            this.port = port;
            final List<RingMember> members = new ArrayList<>();
            final List<RingMember> claimed = new ArrayList<>();
            for (int r = 0; r < WORLD; r++)
            {
                members.add(new RingMember(r, TestBed.workerIp(r)));
                claimed.add(new RingMember(r, r == 0 ? TestBed.address(TestBed.OUTSIDER_IP) : TestBed.workerIp(r)));
            }
            final RingDefinition requests = new RingDefinition(RING, "racks", ElementType.FP32, WINDOW, MSG_LEN, PMTU,
                members);
            final RingDefinition partials = new RingDefinition(RING, "racks", ElementType.FP32, WINDOW, MSG_LEN, PMTU,
                members, Hierarchy.PARTIAL_TAG, InaHeader.RESULT_TAG);
            final RingDefinition results = new RingDefinition(RING, "racks", ElementType.FP32, WINDOW, MSG_LEN, PMTU,
                members, InaHeader.RESULT_TAG, InaHeader.RESULT_TAG);
            final RingDefinition ownAddress = new RingDefinition(RING, "racks", ElementType.FP32, WINDOW, MSG_LEN,
                PMTU, claimed);
            final int rank2Qp = ring.link(2).receiveQp().qpn();
            final int rank1Qp = ring.link(1).receiveQp().qpn();
            final int rank0Qp = ring.link(0).receiveQp().qpn();
            crafters.put(Crafted.MEMBER_ADDRESS, new RingWorker(requests, 1, rank2Qp, 101, OUTSIDER_MAC,
                TestBed.workerMac(2)));
            crafters.put(Crafted.OWN_ADDRESS, new RingWorker(ownAddress, 0, rank1Qp, 202, OUTSIDER_MAC,
                TestBed.workerMac(1)));
            crafters.put(Crafted.PARTIAL, new RingWorker(partials, 1, rank2Qp, 303, OUTSIDER_MAC,
                TestBed.workerMac(2)));
            crafters.put(Crafted.PARTIAL_OTHER_QP, new RingWorker(partials, 1, rank2Qp + 0x100, 404, OUTSIDER_MAC,
                TestBed.workerMac(2)));
            crafters.put(Crafted.RESULT, new RingWorker(results, 3, rank0Qp, 505, OUTSIDER_MAC,
                TestBed.workerMac(0)));
            crafters.put(Crafted.BAD_ICRC, new RingWorker(requests, 0, rank1Qp, 606, TestBed.workerMac(0),
                TestBed.workerMac(1)));
            poison = new byte[crafters.get(Crafted.RESULT).gradientBytes()];
            final ByteBuffer values = ByteBuffer.wrap(poison).order(ByteOrder.LITTLE_ENDIAN);
            while (values.remaining() >= Float.BYTES)
            {
                values.putFloat(1.0e30f);
            }
            for (final Crafted kind : Crafted.values())
            {
                sent.put(kind, 0L);
            }
        }

        Map<Crafted, Long> sent()
        {
            return sent;
        }

        /** A frame seen on leaf-a's port: the first packet of a spine result for rack 0 (3 -> 0, NRES) is kept. */
        int recordIfSpineResult(final org.agrona.MutableDirectBuffer buffer, final int offset, final int length)
        {
            if (recorded.size() >= 256 || parsed.wrap(buffer, offset, length) != RoceFrame.OK ||
                parsed.ipVersion() != 4 || parsed.payloadLength() < InaHeader.LENGTH ||
                InaHeader.inetTag(buffer, parsed.payloadOffset()) != InaHeader.RESULT_TAG ||
                buffer.getByte(parsed.srcAddressOffset() + 3) != 4 || buffer.getByte(parsed.dstAddressOffset() + 3) != 1)
            {
                return 0;
            }
            final byte[] copy = new byte[length];
            buffer.getBytes(offset, copy);
            recorded.add(copy);
            return 1;
        }

        @Override
        public int getAsInt()
        {
            final long now = System.nanoTime();
            if (now - lastNs < 1_000_000)
            {
                return 0;
            }
            lastNs = now;
            final Crafted kind = Crafted.values()[(int)(next % Crafted.values().length)];
            final long index = next++ / Crafted.values().length;
            final byte[] bytes;
            if (kind == Crafted.REPLAYED_RESULT)
            {
                if (recorded.isEmpty())
                {
                    return 0;
                }
                bytes = recorded.get((int)(index % recorded.size()));
            }
            else
            {
                // MsgIDs cycling over the window's slots, as the ring's own.
                bytes = crafters.get(kind).message(index % (2 * WINDOW), poison).getFirst();
                if (kind == Crafted.BAD_ICRC)
                {
                    bytes[bytes.length - 1] ^= 0x5A;
                }
            }
            frame.wrap(bytes);
            if (port.send(frame, 0, bytes.length))
            {
                sent.merge(kind, 1L, Long::sum);
            }
            port.flush();
            return 1;
        }
    }

    private static int ipv4(final InetAddress address)
    {
        final byte[] bytes = address.getAddress();
        return ((bytes[0] & 0xFF) << 24) | ((bytes[1] & 0xFF) << 16) | ((bytes[2] & 0xFF) << 8) | (bytes[3] & 0xFF);
    }
}
