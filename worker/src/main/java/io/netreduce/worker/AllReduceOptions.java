package io.netreduce.worker;

import io.netreduce.host.allreduce.CongestionControl;
import io.netreduce.host.allreduce.RingAllReduce;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/**
 * The options of {@code netreduce worker allreduce} (a picocli mixin of {@link AllReduceCommand}), as given: the
 * command checks how they go together; {@link #parseRacks} reads {@code --racks}, {@link PeerHosts} {@code --peers}.
 */
final class AllReduceOptions
{
    @Option(names = "--rank", required = true, description = "This worker's rank, 0..W-1.")
    int rank;

    @Option(names = "--world", required = true, description = "Number of workers W.")
    int world;

    @Option(names = "--ring-id", description = "RingID in the INA header (default ${DEFAULT-VALUE}).")
    int ringId = 1;

    @Option(names = "--dev", required = true, description = "Interface to open an AF_PACKET port on.")
    String dev;

    @Option(names = "--ip", description = "Local address (default: the interface's first IPv4 address).")
    String ip;

    @Option(names = "--peers", description = "Workers' bootstrap hosts: a file with one 'HOST' or 'RANK HOST' " +
        "per line, or a comma-separated list in rank order (default: 10.77.0.(rank+1), the test bed).")
    String peers;

    @Option(names = "--port", description = "Base bootstrap TCP port; rank r listens on PORT + r (default " +
        "${DEFAULT-VALUE}).")
    int port = 18700;

    @Option(names = "--first-qpn", description = "The first QP number this process's endpoint gives out " +
        "(default ${DEFAULT-VALUE}): two processes on one interface (two jobs' ranks on one host) each see every " +
        "frame, so each needs its own range, as the QP numbers of one RDMA NIC are distinct.")
    int firstQpn = 0x11;

    @Option(names = "--mode", description = "netreduce or ring (default ${DEFAULT-VALUE}).")
    String mode = "netreduce";

    @Option(names = "--protocol", description = "netreduce (RoCEv2 RC connections beneath which the appliance " +
        "aggregates; --mode ring for the ring baseline) or switchml (SwitchML's UDP protocol to the appliance's " +
        "SwitchML job: int32 exact, fp32 in block fixed point; with --mode netreduce, the default; options " +
        "--switch-ip, --switch-mac, --elements, --outstanding, --timeout-us, --udp-port) (default ${DEFAULT-VALUE}).")
    String protocol = "netreduce";

    @Option(names = "--switch-ip", description = "switchml: the switch's IPv4 address, which the appliance answers " +
        "for (default ${DEFAULT-VALUE}, the test bed's).")
    String switchIp = SwitchMlSettings.DEFAULT_SWITCH_IP;

    @Option(names = "--switch-mac", description = "switchml: the switch's MAC, the destination of every packet " +
        "(default ${DEFAULT-VALUE}, the test bed's appliance).")
    String switchMac = SwitchMlSettings.DEFAULT_SWITCH_MAC;

    @Option(names = "--elements", description = "switchml: elements per packet, even, 2..2048: the job's (default " +
        "${DEFAULT-VALUE}).")
    int elements = 256;

    @Option(names = "--outstanding", description = "switchml: packets in flight, at most the job's pool size " +
        "(default: 128 KiB of elements in flight, 16 to 128 packets: 128 at 256 elements, 32 at 1024).")
    Integer outstanding;

    @Option(names = "--timeout-us", description = "switchml: microseconds a packet waits for its result before it " +
        "is sent again; each retransmission of the packet doubles its wait, up to 16 times this (default " +
        "${DEFAULT-VALUE}).")
    long timeoutMicros = 5000;

    @Option(names = "--udp-port", description = "switchml: this worker's UDP source port (default 40000 + rank).")
    Integer udpPort;

    @Option(names = "--controller", paramLabel = "HOST:PORT", description = "switchml: register with the " +
        "appliance's SwitchML controller (appliance.switchml.controller) as the published client does, which opens " +
        "the session's job with these workers and --elements and answers with the switch's MAC and address " +
        "(--switch-ip and --switch-mac are then not used). Without it the job must be in the appliance's " +
        "configuration.")
    String controller;

    @Option(names = "--type", description = "fp32, fp16, bf16 or int32 (default ${DEFAULT-VALUE}).")
    String type = "fp32";

    @Option(names = "--size", description = "Tensor bytes (default ${DEFAULT-VALUE}).")
    int size = 1 << 20;

    @Option(names = "--iterations", description = "All-reduce calls (default ${DEFAULT-VALUE}).")
    int iterations = 5;

    /**
     * 16: with MsgLen 16 and 4 KiB packets, 1 MiB in flight per rank, 8.4 ms at 1 Gbit/s. The bed's round trip is
     * well under a millisecond, but a worker that shares its cores with a trainer is off the CPU for milliseconds at
     * a time, and the pipeline must not drain meanwhile: on the bed (64 MiB, W = 4, 1 Gbit/s, a busy process beside
     * each worker) window 8 took 1147 ms per call and 16 took 829 ms, with the quiet case unchanged (568-571 ms) and
     * W = 8 faster (735 to 677 ms). 32 (2 MiB) overflowed the bed's 1 Gbit/s tbf queues (20 ms, about 3 MB, shared
     * with the ACKs) and resent 49 000 packets a run.
     */
    @Option(names = "--window", description = "NetReduce window N, messages in flight (default ${DEFAULT-VALUE}; " +
        "it must match the ring's window on the appliance).")
    int window = 16;

    /**
     * On: without marks the window stays at --window, so this costs nothing where nothing marks; where a fabric (or
     * the appliance's marker) marks, every rank backs off together instead of overflowing the bottleneck's queue.
     */
    @Option(names = "--ecn-window", negatable = true, fallbackValue = "true", description = "netreduce: adapt the " +
        "window to ECN marks on results, DCTCP-style (PANAMA): alpha <- (1-g) alpha + g F per window of results, " +
        "the window cut to (1 - alpha/2) of itself on a marked window, grown by one message per clean one, between " +
        "--ecn-min-window and --window; the ring's receive connection then sends no CNPs for marked results (default " +
        "${DEFAULT-VALUE}).")
    boolean ecnWindow = true;

    @Option(names = "--ecn-gain", description = "netreduce: g, the weight of each window's marked fraction in " +
        "alpha, in (0, 1] (default ${DEFAULT-VALUE}, DCTCP's 1/16).")
    double ecnGain = CongestionControl.DEFAULT_GAIN;

    /**
     * 1 is the law as PANAMA states it. Above 1 the window keeps that many messages in flight however many results
     * are marked (Linux's DCTCP keeps 2 segments): beside other traffic that holds a marked queue, a window of 1-2
     * messages cannot fill the ring's share of a link whose round trip is mostly CPU (docs/performance.md).
     */
    @Option(names = "--ecn-min-window", description = "netreduce: the floor, in messages, that a marked window " +
        "never cuts the window below, at least 1 (default ${DEFAULT-VALUE}; one above --window is held at --window).")
    int ecnMinWindow = CongestionControl.DEFAULT_MIN_WINDOW;

    @Option(names = "--endpoint-nice", description = EndpointNice.DESCRIPTION)
    int endpointNice = EndpointNice.DEFAULT;

    @Option(names = "--msg-len", description = "NetReduce MsgLen, packets per message (default ${DEFAULT-VALUE}).")
    int msgLen = 16;

    @Option(names = "--payload", description = "RC payload bytes per packet (default: the PMTU).")
    Integer payload;

    @Option(names = "--pmtu", description = "Path MTU: 256..4096 (default ${DEFAULT-VALUE}).")
    int pmtu = 1024;

    @Option(names = "--segment", description = "Ring all-reduce segment bytes (default ${DEFAULT-VALUE}).")
    int segment = RingAllReduce.DEFAULT_SEGMENT_BYTES;

    @Option(names = "--drop", description = "Probability of dropping each packet this endpoint sends (default 0).")
    double drop;

    @Option(names = "--seed", description = "Tensor and fault-injection seed (default ${DEFAULT-VALUE}).")
    long seed = 42;

    @Option(names = "--timeout", description = "Seconds without progress before an all-reduce fails, and the " +
        "limit for connection set-up (default ${DEFAULT-VALUE}).")
    int timeoutSeconds = 10;

    /**
     * 400 ms: measured on the test bed (W = 4, 64 MiB, W + 1 processes on 2 cores), every RC timeout at 100 ms was
     * spurious (no frame lost: appliance and worker rings dropped nothing) and each resent a whole window; at
     * 400 ms there were none, and the call took no longer. Loss within a window is recovered at once by the
     * responder's NAK, so the timeout only serves a lost tail.
     */
    @Option(names = "--rto-us", description = "Initial retransmission timeout in microseconds (default " +
        "${DEFAULT-VALUE}: on hosts whose cores are shared a shorter one fires spuriously; loss within a window " +
        "is recovered at once by NAK).")
    long rtoMicros = 400_000;

    @Option(names = "--json", description = "Print one JSON summary line at the end.")
    boolean json;

    @Option(names = "--inet-tag", description = "InetTag of the ring, 4 ASCII characters (default ${DEFAULT-VALUE}).")
    String inetTag = "NRED";

    @Option(names = "--result-tag", description = "InetTag the appliance writes into results, 4 ASCII characters; " +
        "the same as --inet-tag when the ring leaves results unmarked (default ${DEFAULT-VALUE}).")
    String resultTag = "NRES";

    @Option(names = "--racks", paramLabel = "FIRST-LAST,...", description = "A multi-rack ring's racks, e.g. " +
        "0-1,2-3 (consecutive ranks, rack 0 from rank 0, the last rack ending at W-1): results are then checked " +
        "against the hierarchy's sum, each rack's ranks in rank order rounded to the element type, then the racks " +
        "in rack order (netreduce mode only; default: one flat ring).")
    String racks;

    @Option(names = "--trace", description = "Write a per-call timeline (CSV) to FILE: when each message left and " +
        "its result came back, each retransmission and what triggered it (timeout or NAK).")
    Path traceFile;

    @Option(names = "--segmentation-offload", negatable = true, description = "Send runs of packets to one " +
        "destination as one UDP segmentation offload frame (PACKET_VNET_HDR), as an RDMA NIC takes a message and " +
        "cuts it into packets itself, and split such frames arriving back into packets. The interface (or the " +
        "path) segments them for the wire; on veth they may travel whole and are split here (default " +
        "${DEFAULT-VALUE}).", fallbackValue = "true")
    boolean segmentationOffload = true;

    @Option(names = "--idle", description = "How the rank waits when its endpoint has nothing to do: poll (spin " +
        "briefly, then block in poll(2) until a frame or the next RC timer; leaves shared cores to others) or " +
        "yield (spin with Thread.yield) (default ${DEFAULT-VALUE}).")
    String idleMode = "poll";

    @Option(names = "--warm-up-frames", description = "netreduce: before the ring is connected, run the worker's " +
        "per-packet path (a ring over RC with this run's window, MsgLen, PMTU and element type; see --warm-up-dev) " +
        "for this many packets, at most 5 s, so that the JIT has compiled it before the first call instead of " +
        "during it; 0 for none (default ${DEFAULT-VALUE}; the JVM property netreduce.endpointWarmUpFrames sets the " +
        "default).")
    long warmUpFrames = Long.getLong("netreduce.endpointWarmUpFrames", DEFAULT_WARM_UP_FRAMES);

    /**
     * The warm-up's packets: on the 2-core bed, W = 8 at 1 Gbit/s, eight workers starting at once, 65,536 on
     * {@code lo} took 3.1-5.0 s each (half stopped at the 5 s limit) and left the first 64 MiB call at 1.35-1.73 x
     * the steady one (median 1.40, four runs), where 16,384 in memory left it at 1.70-2.45 x (median 1.95) and 16,384
     * on {@code lo} at 1.65 and 2.09 (docs/performance.md, "Start-up and the first calls").
     */
    static final long DEFAULT_WARM_UP_FRAMES = 65_536;

    @Option(names = "--warm-up-dev", description = "Where the warm-up's ring runs: three ranks on AF_PACKET ports " +
        "of this interface with --dev's port settings, so that the port's own code is compiled too (each rank takes " +
        "only frames to its own made-up MAC, which the host's stack drops), or " + WARM_UP_IN_MEMORY + " (two " +
        "ranks on ports in memory; also where the interface cannot be used) (default ${DEFAULT-VALUE}).")
    String warmUpDev = "lo";

    /** {@code --warm-up-dev} for a warm-up on ports in memory. */
    static final String WARM_UP_IN_MEMORY = "memory";

    @Option(names = "--local-workers", description = "Parallel NetReduce (paper §3.4): this process is host --rank " +
        "of --world hosts with n local workers (GPUs), local worker i being the host's rank in ring --ring-id + i; " +
        "each call reduce-scatters the n local tensors in shared memory, all-reduces part i on ring i (all rings " +
        "at once, one endpoint, distinct QPNs), then all-gathers. Ring i bootstraps on PORT + i*W + rank. Local " +
        "worker j of host h has global rank h*n + j (its input pattern); results are checked against the sum " +
        "with one rack per host. netreduce mode only (default ${DEFAULT-VALUE}: one worker, one ring).")
    int localWorkers = 1;

    @Option(names = "--trees", description = "Aggregation trees (PANAMA §4.1): the job's messages go round robin " +
        "over T rings of the same ranks, message k to tree k mod T; tree t is ring --ring-id + t, aggregated by its " +
        "own appliance (the topology file names it: rings[].appliance), its queue pairs sending from UDP source " +
        "port 0xBF00 + t, by which the switch steers the tree to its appliance (testbed.sh up --trees T), and its " +
        "ECN window adapting on its own results. Tree t bootstraps on PORT + t*W + rank. netreduce mode, without " +
        "--racks and --local-workers (default ${DEFAULT-VALUE}: one tree, the ring's usual ports).")
    int trees = 1;

    /**
     * @return the first rank of each rack of {@code text} ("0-1,2-3"; "5" is a rack of one rank).
     * @throws IllegalArgumentException unless the racks are consecutive ranges covering 0..world-1 in order.
     */
    static int[] parseRacks(final String text, final int world)
    {
        final String[] parts = text.split(",", -1);
        if (parts.length < 2)
        {
            throw new IllegalArgumentException("--racks needs at least two racks: '" + text + "'");
        }
        final int[] first = new int[parts.length];
        int next = 0;
        for (int k = 0; k < parts.length; k++)
        {
            final String part = parts[k].trim();
            final int dash = part.indexOf('-');
            final int lo;
            final int hi;
            try
            {
                lo = Integer.parseInt(dash < 0 ? part : part.substring(0, dash));
                hi = dash < 0 ? lo : Integer.parseInt(part.substring(dash + 1));
            }
            catch (final NumberFormatException ex)
            {
                throw new IllegalArgumentException("--racks: rack " + k + " '" + part + "' is not FIRST-LAST");
            }
            if (lo != next || hi < lo)
            {
                throw new IllegalArgumentException("--racks: rack " + k + " '" + part + "' must begin at rank " +
                    next + " and not end before it (racks hold consecutive ranks in ring order, rack 0 from rank 0)");
            }
            first[k] = lo;
            next = hi + 1;
        }
        if (next != world)
        {
            throw new IllegalArgumentException("--racks: the last rack must end at rank " + (world - 1) + " (W-1), " +
                "not " + (next - 1));
        }
        return first;
    }
}
