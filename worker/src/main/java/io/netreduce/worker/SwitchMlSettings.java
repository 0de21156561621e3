package io.netreduce.worker;

import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.host.switchml.SwitchMlWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.EthernetHeader;

/**
 * {@code worker allreduce --protocol switchml}'s options, checked: what goes with SwitchML and what does not. The
 * options of the RC transport (--pmtu, --payload, --window, --msg-len, --rto-us, --segment, --drop, tags, --peers,
 * --port) do not apply and are ignored.
 *
 * @param switchIp    the switch's (the appliance's) IPv4 address, as an int.
 * @param switchMac   its MAC.
 * @param elements    elements per packet: even, 2 to 2048, the job's.
 * @param outstanding packets in flight: at most the job's pool size.
 * @param timeoutNs   the retransmission timeout.
 * @param udpPort     this worker's UDP source port.
 * @param int32       int32 (exact) rather than fp32 (block fixed point).
 */
record SwitchMlSettings(
    int switchIp, long switchMac, int elements, int outstanding, long timeoutNs, int udpPort, boolean int32)
{
    /** The test bed's SwitchML address: the appliance answers for it (scripts/testbed.sh). */
    static final String DEFAULT_SWITCH_IP = "10.77.0.254";
    /** The test bed's appliance MAC. */
    static final String DEFAULT_SWITCH_MAC = "02:77:00:00:00:fe";
    /** Rank r's UDP source port by default: {@value} + r. */
    static final int DEFAULT_UDP_PORT_BASE = 40_000;

    /**
     * @throws IllegalArgumentException with a message for the command line when an option does not go with
     *                                  SwitchML or is out of range.
     */
    static SwitchMlSettings of(final AllReduceOptions options, final ElementType type)
    {
        if (!"netreduce".equals(options.mode))
        {
            throw new IllegalArgumentException("--protocol switchml aggregates on the appliance; --mode " +
                options.mode + " does not go with it (leave --mode out)");
        }
        if (type != ElementType.INT32 && type != ElementType.FP32)
        {
            throw new IllegalArgumentException("--protocol switchml carries int32 (exact) and fp32 (block fixed " +
                "point) only, not " + type.cliName());
        }
        if (options.world > ExponentQuantizer.MAX_WORKERS)
        {
            throw new IllegalArgumentException("--protocol switchml takes at most " + ExponentQuantizer.MAX_WORKERS +
                " workers: --world " + options.world);
        }
        if (options.localWorkers != 1 || options.racks != null || options.traceFile != null)
        {
            throw new IllegalArgumentException("--local-workers, --racks and --trace apply to --protocol netreduce " +
                "only");
        }
        if (options.controller != null)
        {
            requireController(options.controller, options.elements);
        }
        if (options.elements < 2 || options.elements > SwitchMlWorker.Config.MAX_ELEMENTS ||
            (options.elements & 1) != 0)
        {
            throw new IllegalArgumentException("--elements must be even, 2.." + SwitchMlWorker.Config.MAX_ELEMENTS +
                " (the job's elements per packet): " + options.elements);
        }
        final int outstanding =
            options.outstanding != null ? options.outstanding : defaultOutstanding(options.elements);
        requireFlight(outstanding, options.timeoutMicros);
        if (!"poll".equals(options.idleMode) && !"yield".equals(options.idleMode))
        {
            throw new IllegalArgumentException("--idle must be poll or yield: " + options.idleMode);
        }
        final int udpPort = options.udpPort != null ? options.udpPort : DEFAULT_UDP_PORT_BASE + options.rank;
        if (udpPort < 1 || udpPort > 0xFFFF)
        {
            throw new IllegalArgumentException("--udp-port must be 1..65535: " + udpPort);
        }
        return new SwitchMlSettings(parseIpv4("--switch-ip", options.switchIp),
            parseMac("--switch-mac", options.switchMac), options.elements, outstanding,
            options.timeoutMicros * 1_000, udpPort, type == ElementType.INT32);
    }

    /** Elements' bytes a worker keeps in flight by default. */
    static final int DEFAULT_BYTES_IN_FLIGHT = 128 << 10;

    /**
     * Packets in flight by default: {@value #DEFAULT_BYTES_IN_FLIGHT} bytes of elements, 16 to 128 packets. What a
     * worker has in flight waits in its link's queue, and every packet's round trip includes it: at 1 Gbit/s, W = 4,
     * 64 MiB int32 with 1024 elements per packet, 128 packets (512 KiB, 4 ms of the link) gave a median call of
     * 1001 ms and 0.18 of every tensor resent, 32 packets 656 ms and 0.007 (NetReduce in the same runs: 692 and
     * 699 ms); unshaped, W = 8: 1984 against 1283 ms. Small packets stay at 128: 512 packets of 64 elements took
     * 7410 ms and resent 0.34 of every tensor, 128 of them 4489 ms (docs/performance.md).
     */
    static int defaultOutstanding(final int elements)
    {
        return Math.clamp(DEFAULT_BYTES_IN_FLIGHT / (Math.max(2, elements) * Integer.BYTES), 16, 128);
    }

    /**
     * Checks --outstanding and --timeout-us (worker allreduce, worker serve).
     */
    static void requireFlight(final int outstanding, final long timeoutMicros)
    {
        if (outstanding < 1 || outstanding > 16_384)
        {
            throw new IllegalArgumentException("--outstanding must be 1..16384 (and at most the job's pool size): " +
                outstanding);
        }
        if (timeoutMicros < 1)
        {
            throw new IllegalArgumentException("--timeout-us must be positive: " + timeoutMicros);
        }
    }

    /**
     * Checks --controller and the --elements it opens a session with (worker allreduce, worker serve).
     *
     * @throws IllegalArgumentException if the controller is not HOST:PORT, or the elements have no packet size code
     *                                  (a power of two from 32 to 2048).
     */
    static void requireController(final String controller, final int elements)
    {
        final int colon = controller.lastIndexOf(':');
        int port;
        try
        {
            port = colon > 0 ? Integer.parseInt(controller.substring(colon + 1)) : -1;
        }
        catch (final NumberFormatException ex)
        {
            port = -1;
        }
        if (port < 1 || port > 65_535)
        {
            throw new IllegalArgumentException("--controller must be HOST:PORT, not " + controller);
        }
        if (Integer.bitCount(elements) != 1 || elements < 32 || elements > SwitchMlWorker.Config.MAX_ELEMENTS)
        {
            throw new IllegalArgumentException("--controller opens a session by packet size code: --elements " +
                "must be a power of two from 32 to 2048, not " + elements);
        }
    }

    /**
     * @return a dotted-quad IPv4 address as an int (no name look-up).
     */
    static int parseIpv4(final String option, final String text)
    {
        final String[] parts = text.split("\\.", -1);
        if (parts.length != 4)
        {
            throw new IllegalArgumentException(option + " must be an IPv4 address (a.b.c.d): " + text);
        }
        int ip = 0;
        for (final String part : parts)
        {
            if (part.isEmpty() || part.length() > 3 || !part.chars().allMatch(c -> c >= '0' && c <= '9') ||
                Integer.parseInt(part) > 255)
            {
                throw new IllegalArgumentException(option + " must be an IPv4 address (a.b.c.d): " + text);
            }
            ip = ip << 8 | Integer.parseInt(part);
        }
        return ip;
    }

    private static long parseMac(final String option, final String text)
    {
        try
        {
            return EthernetHeader.parseMac(text);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException(option + " must be a MAC address (aa:bb:cc:dd:ee:ff): " + text);
        }
    }
}
