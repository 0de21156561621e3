package io.netreduce.host.rc;

/**
 * Tunables of an {@link RcEndpoint} and its queue pairs, with defaults chosen for a software endpoint on a
 * low-latency link (veth, a switch in the same rack). Fluent setters validate; build one, then hand it to the
 * endpoint (it is read, never changed, after that).
 *
 * <table>
 *   <caption>Defaults</caption>
 *   <tr><td>pmtu</td><td>1024</td><td>path MTU: payload bytes per packet (256, 512, 1024, 2048, 4096)</td></tr>
 *   <tr><td>maxOutstandingPackets</td><td>1024</td><td>requester window in PSNs (sent, not yet acknowledged)</td></tr>
 *   <tr><td>ackRequestInterval</td><td>64</td><td>AckReq is set on the last packet of a message and at least this often</td></tr>
 *   <tr><td>sendQueueDepth / receiveQueueDepth</td><td>256 / 256</td><td>work requests per queue</td></tr>
 *   <tr><td>retransmitTimeoutNs</td><td>4 ms</td><td>first retransmission timeout; doubles per expiry</td></tr>
 *   <tr><td>maxRetransmitTimeoutNs</td><td>256 ms</td><td>back-off ceiling</td></tr>
 *   <tr><td>retryCount</td><td>7</td><td>timeouts in a row before RETRY_EXCEEDED</td></tr>
 *   <tr><td>rnrTimeoutNs / rnrRetryCount</td><td>100 us / 7</td><td>wait after an RNR NAK; 7 means retry forever, as in IB</td></tr>
 *   <tr><td>ackCoalescePackets / ackCoalesceDelayNs</td><td>16 / 20 us</td><td>responder ACKs at least this often</td></tr>
 *   <tr><td>cnpIntervalNs</td><td>50 us</td><td>at most one CNP per queue pair per interval</td></tr>
 *   <tr><td>lineRateBitsPerSecond</td><td>100 Gbit/s</td><td>rate limiter ceiling; at the ceiling the limiter is off</td></tr>
 *   <tr><td>minRateBitsPerSecond</td><td>10 Mbit/s</td><td>rate limiter floor</td></tr>
 *   <tr><td>rateDecreaseFactor</td><td>0.5</td><td>rate multiplier on a CNP</td></tr>
 *   <tr><td>rateIncreaseIntervalNs</td><td>55 us</td><td>recovery step period</td></tr>
 *   <tr><td>additiveIncreaseBitsPerSecond</td><td>40 Mbit/s</td><td>target rate step after fast recovery</td></tr>
 *   <tr><td>trafficClass</td><td>0x02</td><td>IP TOS: DSCP 0, ECN ECT(0) so switches may mark CE</td></tr>
 *   <tr><td>send/receiveDropProbability</td><td>0</td><td>fault injection, seeded by faultSeed</td></tr>
 *   <tr><td>psnSeed</td><td>none: drawn from SecureRandom</td><td>start PSNs of new queue pairs; random, as NICs
 *   choose them, so that a new job on reused QP numbers does not also reuse the start PSNs (which the appliance
 *   could take for a retransmission of the old job's messages); set it only for reproducible captures</td></tr>
 *   <tr><td>firstQpn</td><td>0x11</td><td>the first QP number the endpoint gives out. An RDMA NIC's QP numbers are
 *   unique per device; two software endpoints on one interface (two jobs' ranks on one host) each see every frame
 *   and must not both own a number, so each such process takes its own range</td></tr>
 * </table>
 */
public final class RcConfig
{
    private int pmtu = 1024;
    private int maxOutstandingPackets = 1024;
    private int ackRequestInterval = 64;
    private int sendQueueDepth = 256;
    private int receiveQueueDepth = 256;
    private long retransmitTimeoutNs = 4_000_000L;
    private long maxRetransmitTimeoutNs = 256_000_000L;
    private int retryCount = 7;
    private long rnrTimeoutNs = 100_000L;
    private int rnrRetryCount = 7;
    private int ackCoalescePackets = 16;
    private long ackCoalesceDelayNs = 20_000L;
    private long cnpIntervalNs = 50_000L;
    private long lineRateBitsPerSecond = 100_000_000_000L;
    private long minRateBitsPerSecond = 10_000_000L;
    private double rateDecreaseFactor = 0.5;
    private long rateIncreaseIntervalNs = 55_000L;
    private long additiveIncreaseBitsPerSecond = 40_000_000L;
    private int fastRecoverySteps = 5;
    private int rateBurstBytes = 16 * 1024;
    private int trafficClass = 0x02;
    private int receiveBatch = 64;
    private int transmitBurst = 64;
    private double sendDropProbability;
    private double receiveDropProbability;
    private long faultSeed = 0x5EED;
    private Long psnSeed;
    private int firstQpn = 0x11;

    public int pmtu()
    {
        return pmtu;
    }

    public RcConfig pmtu(final int pmtu)
    {
        if (pmtu != 256 && pmtu != 512 && pmtu != 1024 && pmtu != 2048 && pmtu != 4096)
        {
            throw new IllegalArgumentException("pmtu must be 256, 512, 1024, 2048 or 4096: " + pmtu);
        }
        this.pmtu = pmtu;
        return this;
    }

    public int maxOutstandingPackets()
    {
        return maxOutstandingPackets;
    }

    public RcConfig maxOutstandingPackets(final int packets)
    {
        // Half the PSN space is the hard limit for serial-number comparison; far below that in practice.
        this.maxOutstandingPackets = requireRange("maxOutstandingPackets", packets, 1, 1 << 22);
        return this;
    }

    /**
     * Longest header a request packet carries on the wire around its payload: Ethernet, IPv4 or IPv6, UDP, BTH,
     * RETH, ImmDt and the ICRC (14 + 40 + 8 + 12 + 16 + 4 + 4 bytes), rounded up.
     */
    static final int MAX_PACKET_OVERHEAD = 128;

    /**
     * @return the bytes one queue pair may have on the wire unacknowledged at most: the window of
     *         {@link #maxOutstandingPackets()} packets of {@link #pmtu()} payload, headers included. A transmit
     *         socket whose kernel buffer holds less turns the window's wait for the link into refused kicks
     *         ({@code AfPacketConfiguration#txSocketBuffer}).
     */
    public long windowBytes()
    {
        return (long)maxOutstandingPackets * (pmtu + MAX_PACKET_OVERHEAD);
    }

    public int ackRequestInterval()
    {
        return ackRequestInterval;
    }

    public RcConfig ackRequestInterval(final int packets)
    {
        this.ackRequestInterval = requireRange("ackRequestInterval", packets, 1, 64);
        return this;
    }

    public int sendQueueDepth()
    {
        return sendQueueDepth;
    }

    public RcConfig sendQueueDepth(final int depth)
    {
        this.sendQueueDepth = requireRange("sendQueueDepth", depth, 1, 1 << 16);
        return this;
    }

    public int receiveQueueDepth()
    {
        return receiveQueueDepth;
    }

    public RcConfig receiveQueueDepth(final int depth)
    {
        this.receiveQueueDepth = requireRange("receiveQueueDepth", depth, 1, 1 << 16);
        return this;
    }

    public long retransmitTimeoutNs()
    {
        return retransmitTimeoutNs;
    }

    public RcConfig retransmitTimeoutNs(final long ns)
    {
        this.retransmitTimeoutNs = requirePositive("retransmitTimeoutNs", ns);
        return this;
    }

    public long maxRetransmitTimeoutNs()
    {
        return maxRetransmitTimeoutNs;
    }

    public RcConfig maxRetransmitTimeoutNs(final long ns)
    {
        this.maxRetransmitTimeoutNs = requirePositive("maxRetransmitTimeoutNs", ns);
        return this;
    }

    public int retryCount()
    {
        return retryCount;
    }

    public RcConfig retryCount(final int count)
    {
        this.retryCount = requireRange("retryCount", count, 0, 1000);
        return this;
    }

    public long rnrTimeoutNs()
    {
        return rnrTimeoutNs;
    }

    public RcConfig rnrTimeoutNs(final long ns)
    {
        this.rnrTimeoutNs = requirePositive("rnrTimeoutNs", ns);
        return this;
    }

    public int rnrRetryCount()
    {
        return rnrRetryCount;
    }

    /**
     * @param count RNR NAKs in a row tolerated; 7 means unlimited (the IB encoding).
     */
    public RcConfig rnrRetryCount(final int count)
    {
        this.rnrRetryCount = requireRange("rnrRetryCount", count, 0, 7);
        return this;
    }

    public int ackCoalescePackets()
    {
        return ackCoalescePackets;
    }

    public RcConfig ackCoalescePackets(final int packets)
    {
        this.ackCoalescePackets = requireRange("ackCoalescePackets", packets, 1, 1 << 16);
        return this;
    }

    public long ackCoalesceDelayNs()
    {
        return ackCoalesceDelayNs;
    }

    public RcConfig ackCoalesceDelayNs(final long ns)
    {
        this.ackCoalesceDelayNs = requirePositive("ackCoalesceDelayNs", ns);
        return this;
    }

    public long cnpIntervalNs()
    {
        return cnpIntervalNs;
    }

    public RcConfig cnpIntervalNs(final long ns)
    {
        this.cnpIntervalNs = requirePositive("cnpIntervalNs", ns);
        return this;
    }

    public long lineRateBitsPerSecond()
    {
        return lineRateBitsPerSecond;
    }

    public RcConfig lineRateBitsPerSecond(final long bps)
    {
        this.lineRateBitsPerSecond = requirePositive("lineRateBitsPerSecond", bps);
        return this;
    }

    public long minRateBitsPerSecond()
    {
        return minRateBitsPerSecond;
    }

    public RcConfig minRateBitsPerSecond(final long bps)
    {
        this.minRateBitsPerSecond = requirePositive("minRateBitsPerSecond", bps);
        return this;
    }

    public double rateDecreaseFactor()
    {
        return rateDecreaseFactor;
    }

    public RcConfig rateDecreaseFactor(final double factor)
    {
        if (!(factor > 0 && factor < 1))
        {
            throw new IllegalArgumentException("rateDecreaseFactor must be in (0, 1): " + factor);
        }
        this.rateDecreaseFactor = factor;
        return this;
    }

    public long rateIncreaseIntervalNs()
    {
        return rateIncreaseIntervalNs;
    }

    public RcConfig rateIncreaseIntervalNs(final long ns)
    {
        this.rateIncreaseIntervalNs = requirePositive("rateIncreaseIntervalNs", ns);
        return this;
    }

    public long additiveIncreaseBitsPerSecond()
    {
        return additiveIncreaseBitsPerSecond;
    }

    public RcConfig additiveIncreaseBitsPerSecond(final long bps)
    {
        this.additiveIncreaseBitsPerSecond = requirePositive("additiveIncreaseBitsPerSecond", bps);
        return this;
    }

    public int fastRecoverySteps()
    {
        return fastRecoverySteps;
    }

    public RcConfig fastRecoverySteps(final int steps)
    {
        this.fastRecoverySteps = requireRange("fastRecoverySteps", steps, 0, 1000);
        return this;
    }

    public int rateBurstBytes()
    {
        return rateBurstBytes;
    }

    public RcConfig rateBurstBytes(final int bytes)
    {
        this.rateBurstBytes = requireRange("rateBurstBytes", bytes, 256, 1 << 24);
        return this;
    }

    public int trafficClass()
    {
        return trafficClass;
    }

    public RcConfig trafficClass(final int trafficClass)
    {
        this.trafficClass = requireRange("trafficClass", trafficClass, 0, 255);
        return this;
    }

    public int receiveBatch()
    {
        return receiveBatch;
    }

    public RcConfig receiveBatch(final int frames)
    {
        this.receiveBatch = requireRange("receiveBatch", frames, 1, 4096);
        return this;
    }

    public int transmitBurst()
    {
        return transmitBurst;
    }

    /**
     * @param packets request packets one queue pair may send per duty cycle.
     */
    public RcConfig transmitBurst(final int packets)
    {
        this.transmitBurst = requireRange("transmitBurst", packets, 1, 4096);
        return this;
    }

    public double sendDropProbability()
    {
        return sendDropProbability;
    }

    public RcConfig sendDropProbability(final double p)
    {
        this.sendDropProbability = requireProbability("sendDropProbability", p);
        return this;
    }

    public double receiveDropProbability()
    {
        return receiveDropProbability;
    }

    public RcConfig receiveDropProbability(final double p)
    {
        this.receiveDropProbability = requireProbability("receiveDropProbability", p);
        return this;
    }

    public long faultSeed()
    {
        return faultSeed;
    }

    public RcConfig faultSeed(final long seed)
    {
        this.faultSeed = seed;
        return this;
    }

    /**
     * @return the seed of start PSNs, or null when they are drawn at random (the default).
     */
    public Long psnSeed()
    {
        return psnSeed;
    }

    /**
     * @param seed start PSNs of new queue pairs follow from this seed (and the endpoint's MAC): reproducible runs
     *             only; a real deployment leaves them random.
     */
    public RcConfig psnSeed(final long seed)
    {
        this.psnSeed = seed;
        return this;
    }

    /**
     * @return the first QP number this endpoint gives out (then upwards, skipping those in use).
     */
    public int firstQpn()
    {
        return firstQpn;
    }

    /**
     * @param qpn the first QP number to give out, 1..2^24 - 1 (0 is reserved, and 1 is the GSI's): distinct ranges
     *            for endpoints that share an interface.
     */
    public RcConfig firstQpn(final int qpn)
    {
        this.firstQpn = requireRange("firstQpn", qpn, 2, 0xFF_FFFF);
        return this;
    }

    private static int requireRange(final String name, final int value, final int min, final int max)
    {
        if (value < min || value > max)
        {
            throw new IllegalArgumentException(name + " must be in [" + min + ", " + max + "]: " + value);
        }
        return value;
    }

    private static long requirePositive(final String name, final long value)
    {
        if (value <= 0)
        {
            throw new IllegalArgumentException(name + " must be positive: " + value);
        }
        return value;
    }

    private static double requireProbability(final String name, final double p)
    {
        if (!(p >= 0 && p < 1))
        {
            throw new IllegalArgumentException(name + " must be in [0, 1): " + p);
        }
        return p;
    }
}
