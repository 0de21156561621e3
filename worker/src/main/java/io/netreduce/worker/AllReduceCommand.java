package io.netreduce.worker;

import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.ThreadNice;
import io.netreduce.protocol.port.PortCounters;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.host.allreduce.Arithmetic;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.ParallelAllReduce;
import io.netreduce.host.allreduce.RingAllReduce;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.rc.Bootstrap;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.host.rc.TraceRecorder;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * {@code netreduce worker allreduce}: one rank of a ring all-reducing a generated tensor, by NetReduce through the
 * appliance or by the ring algorithm, and checking every result against the exact expected sum.
 * <p>
 * Connection set-up: rank r listens on TCP port {@code --port + r} for its predecessor and connects to its
 * successor's port; over those connections the ranks exchange queue pair numbers, PSNs, addresses, MACs and the
 * receive region (VA, R_Key, length), then wait until both neighbours are connected. At the end each rank tells
 * both neighbours it is done and keeps its endpoint running (answering retransmissions) until they are too.
 */
@Command(
    name = "allreduce",
    mixinStandardHelpOptions = true,
    description = "One rank of a NetReduce (or ring) all-reduce; checks results against the exact sum.")
public final class AllReduceCommand implements Callable<Integer>
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

    @Option(names = "--mode", description = "netreduce or ring (default ${DEFAULT-VALUE}).")
    String mode = "netreduce";

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
    java.nio.file.Path traceFile;

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

    @Option(names = "--local-workers", description = "Parallel NetReduce (paper §3.4): this process is host --rank " +
        "of --world hosts with n local workers (GPUs), local worker i being the host's rank in ring --ring-id + i; " +
        "each call reduce-scatters the n local tensors in shared memory, all-reduces part i on ring i (all rings " +
        "at once, one endpoint, distinct QPNs), then all-gathers. Ring i bootstraps on PORT + i*W + rank. Local " +
        "worker j of host h has global rank h*n + j (its input pattern); results are checked against the sum " +
        "with one rack per host. netreduce mode only (default ${DEFAULT-VALUE}: one worker, one ring).")
    int localWorkers = 1;

    private final PrintStream out = System.out;

    /** Where the work between calls runs ({@link #offEndpointThread}); its thread keeps the process's nice value. */
    private final java.util.concurrent.ExecutorService checker = java.util.concurrent.Executors.newSingleThreadExecutor(
        Thread.ofPlatform().daemon().name("allreduce-check").factory());

    /** Whether the endpoint's thread runs at {@link #endpointNice} (the kernel may refuse it). */
    private boolean endpointNiceApplied;

    /** The first rank of each rack (--racks), or null for a flat ring. */
    private int[] rackFirst;

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

    private int tag(final String option, final String text)
    {
        try
        {
            return InaHeader.tagValue(text);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(new CommandLine(this), option + " " + ex.getMessage());
        }
    }

    private IdleStrategy idleStrategy(final RcEndpoint endpoint)
    {
        return switch (idleMode)
        {
            case "poll" -> endpoint.idleStrategy();
            case "yield" -> new YieldingIdleStrategy();
            default -> throw new CommandLine.ParameterException(new CommandLine(this),
                "--idle must be poll or yield: " + idleMode);
        };
    }

    @Override
    public Integer call() throws Exception
    {
        final ElementType elementType;
        final boolean netreduce;
        try
        {
            elementType = ElementType.parse(type);
            netreduce = switch (mode)
            {
                case "netreduce" -> true;
                case "ring" -> false;
                default -> throw new IllegalArgumentException("--mode must be netreduce or ring: " + mode);
            };
            if (world < 2 || rank < 0 || rank >= world)
            {
                throw new IllegalArgumentException("need --world >= 2 and 0 <= --rank < --world");
            }
            if (size <= 0 || size % elementType.size() != 0)
            {
                throw new IllegalArgumentException("--size must be a positive multiple of the element size");
            }
            rackFirst = racks == null ? null : parseRacks(racks, world);
            if (localWorkers < 1 || localWorkers > 16)
            {
                throw new IllegalArgumentException("--local-workers must be 1..16");
            }
            if (localWorkers > 1 && (!netreduce || rackFirst != null || traceFile != null))
            {
                throw new IllegalArgumentException("--local-workers applies to --mode netreduce without --racks " +
                    "or --trace");
            }
            if (size / elementType.size() < localWorkers)
            {
                throw new IllegalArgumentException("--size is too small to split across " + localWorkers +
                    " local workers");
            }
            if (rackFirst != null && !netreduce)
            {
                throw new IllegalArgumentException("--racks applies to --mode netreduce only");
            }
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("allreduce: " + ex.getMessage());
            return 2;
        }
        final int payloadSize = payload != null ? payload : pmtu;
        final RcConfig rc;
        final NetReduceConfig nr;
        try
        {
            rc = new RcConfig()
                .pmtu(pmtu)
                .retransmitTimeoutNs(rtoMicros * 1000)
                .sendDropProbability(drop)
                .faultSeed(seed * 1_000_003L + rank);
            nr = new NetReduceConfig(ringId, window, msgLen, payloadSize, TimeUnit.SECONDS.toNanos(timeoutSeconds),
                tag("--inet-tag", inetTag), tag("--result-tag", resultTag));
            ThreadNice.validate(endpointNice);
            if (netreduce && payloadSize != pmtu)
            {
                throw new IllegalArgumentException("--payload must equal --pmtu for netreduce (each packet carries " +
                    "exactly the payload size)");
            }
        }
        catch (final IllegalArgumentException ex)
        {
            System.err.println("allreduce: " + ex.getMessage());
            return 2;
        }
        final List<String> hosts = peerHosts();
        final int sendBytes = netreduce ? nr.regionBytes() : RingAllReduce.sendRegionBytes(size, world);
        final int receiveBytes = netreduce ? nr.regionBytes() : RingAllReduce.receiveRegionBytes(size, world);
        final AfPacketConfiguration portConfig = AfPacketConfiguration.defaults(dev)
            .withTxRing(8192, 1024)
            .withRxRing(16384, 1024, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withSegmentationOffload(segmentationOffload);
        try (AfPacketPort packetPort = AfPacketPort.open(portConfig))
        {
            final InetAddress localIp = ip != null ? InetAddress.getByName(ip) : interfaceAddress(dev);
            final long localMac = ConnectionInfo.macFromBytes(packetPort.macAddress());
            final RcEndpoint endpoint = new RcEndpoint(packetPort, rc, SystemNanoClock.INSTANCE, localIp, localMac);
            // This thread drives the endpoint; the JSON summary says at which nice value, if the kernel allowed it.
            endpointNiceApplied = EndpointNice.apply(endpointNice, "allreduce", System.err);
            final int n = localWorkers;
            final RingLink[] links = new RingLink[n];
            for (int i = 0; i < n; i++)
            {
                links[i] = new RingLink(endpoint, SystemNanoClock.INSTANCE, rank, world, sendBytes, receiveBytes);
            }
            final Duration setupTimeout = Duration.ofSeconds(Math.max(timeoutSeconds, 30));
            final List<Bootstrap> channels = new ArrayList<>();
            try
            {
                for (int i = 0; i < n; i++)
                {
                    // Ring i's bootstrap ports: PORT + i*W + rank.
                    final int base = port + i * world;
                    final CompletableFuture<Bootstrap> fromPredecessor = new CompletableFuture<>();
                    final Thread listener = Thread.ofPlatform().daemon().name("allreduce-listen").start(() ->
                    {
                        try
                        {
                            fromPredecessor.complete(Bootstrap.listen(base + rank, setupTimeout));
                        }
                        catch (final Throwable ex)
                        {
                            fromPredecessor.completeExceptionally(ex);
                        }
                    });
                    final int successor = (rank + 1) % world;
                    final Bootstrap toSuccessor = Bootstrap.connect(hosts.get(successor), base + successor,
                        setupTimeout);
                    channels.add(toSuccessor);
                    final Bootstrap predecessorChannel = awaitBootstrap(fromPredecessor, setupTimeout);
                    channels.add(predecessorChannel);
                    listener.join();
                    // Send on both channels before reading either: with sequential exchanges the ring would deadlock.
                    toSuccessor.sendLine(links[i].sendInfo().toLine());
                    predecessorChannel.sendLine(links[i].receiveInfo().toLine());
                    final ConnectionInfo successorInfo = ConnectionInfo.parse(requireLine(toSuccessor, setupTimeout));
                    final ConnectionInfo predecessorInfo =
                        ConnectionInfo.parse(requireLine(predecessorChannel, setupTimeout));
                    links[i].connect(successorInfo, predecessorInfo);
                    toSuccessor.sendLine("ready");
                    predecessorChannel.sendLine("ready");
                    expectLine(toSuccessor, "ready", setupTimeout);
                    expectLine(predecessorChannel, "ready", setupTimeout);
                }

                final int exitCode;
                if (n == 1)
                {
                    final AllReduce op = netreduce ? new NetReduceAllReduce(links[0], nr) :
                        new RingAllReduce(links[0], segment, TimeUnit.SECONDS.toNanos(timeoutSeconds));
                    exitCode = runIterations(op, elementType, netreduce, size, channels.get(0), channels.get(1));
                }
                else
                {
                    final AllReduce[] ops = new AllReduce[n];
                    for (int i = 0; i < n; i++)
                    {
                        ops[i] = new NetReduceAllReduce(links[i], new NetReduceConfig(ringId + i, window, msgLen,
                            payloadSize, TimeUnit.SECONDS.toNanos(timeoutSeconds), tag("--inet-tag", inetTag),
                            tag("--result-tag", resultTag)));
                    }
                    exitCode = runParallel(new ParallelAllReduce(ops), endpoint, elementType, size);
                }
                for (int i = 0; i < n; i++)
                {
                    finish(endpoint, channels.get(2 * i), channels.get(2 * i + 1));
                }
                return exitCode;
            }
            finally
            {
                for (final Bootstrap channel : channels)
                {
                    channel.close();
                }
            }
        }
    }

    /** --local-workers n: parallel NetReduce, n local tensors per call. */
    private int runParallel(final ParallelAllReduce parallel, final RcEndpoint endpoint,
        final ElementType elementType, final int bytes)
    {
        final int n = parallel.localWorkers();
        final int elements = bytes / elementType.size();
        final Tensor[] tensors = new Tensor[n];
        for (int j = 0; j < n; j++)
        {
            tensors[j] = new Tensor(elementType, new UnsafeBuffer(ByteBuffer.allocateDirect(bytes)), 0, elements);
        }
        final int[] hostFirst = new int[world];
        for (int h = 0; h < world; h++)
        {
            hostFirst[h] = h * n;
        }
        final IdleStrategy idle = idleStrategy(endpoint);
        final long txBefore = endpoint.port().counters().txBytes();
        final double[] callMs = new double[iterations];
        final StringBuilder calls = new StringBuilder();
        final StringBuilder phases = new StringBuilder();
        int completed = 0;
        int matched = 0;
        String error = null;
        String firstMismatch = null;
        for (int iteration = 0; iteration < iterations; iteration++)
        {
            final int it = iteration;
            offEndpointThread(() ->
            {
                for (int j = 0; j < n; j++)
                {
                    TensorPattern.fill(tensors[j], seed, rank * n + j, it);
                }
            });
            final long start = System.nanoTime();
            try
            {
                parallel.allreduce(idle, tensors);
            }
            catch (final AllReduceException ex)
            {
                error = ex.getMessage();
                out.println("iteration " + iteration + " FAILED: " + error);
                break;
            }
            final double ms = (System.nanoTime() - start) / 1e6;
            callMs[completed++] = ms;
            calls.append(calls.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", ms));
            phases.append(phases.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "[%.3f,%.3f,%.3f]",
                parallel.reduceScatterNs() / 1e6, parallel.ringNs() / 1e6, parallel.allGatherNs() / 1e6));
            final String mismatch = offEndpointThread(
                () -> checkParallel(tensors, elementType, elements, hostFirst, it));
            if (mismatch == null)
            {
                matched++;
            }
            else if (firstMismatch == null)
            {
                firstMismatch = mismatch;
            }
            out.printf(Locale.ROOT, "iteration %d host %d parallel x%d %s %d bytes: %.3f ms (reduce-scatter %.3f, " +
                "rings %.3f, all-gather %.3f), goodput %.3f Gbit/s, result: %s%n", iteration, rank, n,
                elementType.cliName(), bytes, ms, parallel.reduceScatterNs() / 1e6, parallel.ringNs() / 1e6,
                parallel.allGatherNs() / 1e6, bytes * 8 / ms / 1e6, mismatch == null ? "exact" : "MISMATCH " +
                mismatch);
        }
        final double[] sorted = java.util.Arrays.copyOf(callMs, completed);
        java.util.Arrays.sort(sorted);
        final double median = completed == 0 ? 0 : sorted[completed / 2];
        final boolean ok = error == null && matched == iterations;
        final long wire = endpoint.port().counters().txBytes() - txBefore;
        out.printf(Locale.ROOT, "summary host %d mode parallel local-workers %d type %s size %d iterations %d " +
            "matched %d: median %.3f ms, wire bytes sent %d, result: %s%n", rank, n, elementType.cliName(), bytes,
            iterations, matched, median, wire, ok ? "exact" : error != null ? "error" : "mismatch");
        // The port's counters, for a loss census: frames the port could not take or deliver whole.
        out.printf(Locale.ROOT, "port %s: %s%n", endpoint.port().name(), endpoint.port().counters());
        if (json)
        {
            out.printf(Locale.ROOT, "{\"rank\":%d,\"world\":%d,\"mode\":\"parallel\",\"local_workers\":%d," +
                "\"type\":\"%s\",\"size\":%d,\"iterations\":%d,\"matched\":%d,\"ok\":%s,\"median_ms\":%.4f," +
                "\"wire_bytes_sent\":%d,\"first_mismatch\":%s,\"error\":%s,\"call_ms\":[%s]," +
                "\"phases_ms\":[%s]}%n", rank, world, n, elementType.cliName(), bytes, iterations, matched, ok, median,
                wire, jsonString(firstMismatch), jsonString(error), calls, phases);
        }
        return ok ? 0 : 1;
    }

    private int runIterations(final AllReduce op, final ElementType elementType, final boolean netreduce,
        final int bytes, final Bootstrap toSuccessor, final Bootstrap fromPredecessor) throws IOException
    {
        final int elements = bytes / elementType.size();
        final Tensor tensor = new Tensor(elementType, new UnsafeBuffer(ByteBuffer.allocateDirect(bytes)), 0, elements);
        final IdleStrategy idle = idleStrategy(op.link().endpoint());
        final int chunkElements = (elements + world - 1) / world;
        final RcEndpoint endpoint = op.link().endpoint();
        double totalSeconds = 0;
        double bestSeconds = Double.MAX_VALUE;
        int matched = 0;
        int completed = 0;
        String firstMismatch = null;
        String error = null;
        final StringBuilder callMs = new StringBuilder();
        final TraceRecorder trace = traceFile == null ? TraceRecorder.OFF : new TraceRecorder(1 << 20);
        endpoint.trace(trace);
        final long bytesBefore = op.bytesPosted();
        final long txBytesBefore = endpoint.port().counters().txBytes();
        if (endpoint.port() instanceof AfPacketPort socket)
        {
            socket.refreshKernelStatistics();
        }
        final long rxDroppedBefore = endpoint.port().counters().get(PortCounters.RX_DROPPED);
        final com.sun.management.OperatingSystemMXBean processCpu =
            (com.sun.management.OperatingSystemMXBean)java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        final StringBuilder cpuMs = new StringBuilder();
        // Each call's start on CLOCK_MONOTONIC, so the bench can tell what else ran on the host during the calls.
        final StringBuilder callStartNs = new StringBuilder();
        for (int iteration = 0; iteration < iterations; iteration++)
        {
            final int filled = iteration;
            offEndpointThread(() -> TensorPattern.fill(tensor, seed, rank, filled));
            // Every rank has checked its last result and filled its next input before any rank times the call, as
            // gloo's benchmark does with dist.barrier(): without it a rank still checking (a scalar reference sum, on
            // the cores the others' calls need) stretched the others' timed calls.
            barrier(endpoint, idle, toSuccessor, fromPredecessor, iteration);
            trace.record(endpoint.nanoTime(), TraceRecorder.CALL_STARTED, 0, iteration);
            final long cpuStart = processCpu.getProcessCpuTime();
            final long start = System.nanoTime();
            try
            {
                op.allreduce(tensor, idle);
            }
            catch (final AllReduceException ex)
            {
                error = ex.getMessage();
                out.println("iteration " + iteration + " FAILED: " + error);
                break;
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            // The whole process's CPU during the call (its compiler and GC threads too), as gloo's rusage counts.
            final double cpuMillis = (processCpu.getProcessCpuTime() - cpuStart) / 1e6;
            trace.record(endpoint.nanoTime(), TraceRecorder.CALL_DONE, 0, iteration);
            callMs.append(callMs.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", seconds * 1e3));
            cpuMs.append(cpuMs.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", cpuMillis));
            callStartNs.append(callStartNs.isEmpty() ? "" : ",").append(start);
            totalSeconds += seconds;
            completed++;
            bestSeconds = Math.min(bestSeconds, seconds);
            final int checked = iteration;
            final String mismatch = offEndpointThread(
                () -> check(tensor, elementType, netreduce, chunkElements, checked));
            if (mismatch == null)
            {
                matched++;
            }
            else if (firstMismatch == null)
            {
                firstMismatch = mismatch;
            }
            out.printf(Locale.ROOT, "iteration %d rank %d %s %s %d bytes: %.3f ms, goodput %.3f Gbit/s, result: %s%n",
                iteration, rank, netreduce ? "netreduce" : "ring", elementType.cliName(), bytes, seconds * 1e3,
                bytes * 8 / seconds / 1e9, mismatch == null ? "exact" : "MISMATCH " + mismatch);
        }
        if (traceFile != null)
        {
            try (java.io.Writer writer = java.nio.file.Files.newBufferedWriter(traceFile))
            {
                trace.writeCsv(writer);
            }
            catch (final java.io.IOException ex)
            {
                out.println("cannot write the trace to " + traceFile + ": " + ex.getMessage());
            }
        }
        final long posted = op.bytesPosted() - bytesBefore;
        final long wire = endpoint.port().counters().txBytes() - txBytesBefore;
        if (endpoint.port() instanceof AfPacketPort socket)
        {
            socket.refreshKernelStatistics();
        }
        // Frames the kernel dropped because this rank's receive ring was full (PACKET_STATISTICS): loss the RC
        // layer then recovers by timeout, counted here so a loss census can place it.
        final long rxDropped = endpoint.port().counters().get(PortCounters.RX_DROPPED) - rxDroppedBefore;
        final var send = op.link().sendQp().counters();
        final boolean ok = error == null && matched == iterations;
        out.printf(Locale.ROOT, "summary rank %d mode %s type %s size %d iterations %d matched %d: mean %.3f ms, " +
            "best %.3f ms, goodput %.3f Gbit/s, rdma payload sent %d bytes (%.3f x tensor per call), wire bytes " +
            "sent %d, retransmitted packets %d, timeouts %d, result: %s%n", rank, netreduce ? "netreduce" : "ring",
            elementType.cliName(), bytes, iterations, matched, meanMs(totalSeconds, completed),
            bestSeconds == Double.MAX_VALUE ? 0.0 : bestSeconds * 1e3,
            totalSeconds > 0 ? (double)bytes * completed * 8 / totalSeconds / 1e9 : 0.0, posted,
            completed > 0 ? posted / (double)bytes / completed : 0.0, wire, send.retransmittedPackets(),
            send.timeouts(), ok ? "exact" : error != null ? "error" : "mismatch");
        // The port's counters, for a loss census: frames the port could not take or deliver whole.
        out.printf(Locale.ROOT, "port %s: %s%n", endpoint.port().name(), endpoint.port().counters());
        out.printf(Locale.ROOT, "send qp: %s%nreceive qp: %s%n", send, op.link().receiveQp().counters());
        out.printf(Locale.ROOT, "endpoint %s: framesReceived=%d notRoce=%d malformed=%d notForUs=%d unknownQp=%d " +
            "icrcErrors=%d%n", endpoint.port().name(), endpoint.framesReceived(), endpoint.notRoce(),
            endpoint.malformed(), endpoint.notForUs(), endpoint.unknownQp(), endpoint.icrcErrors());
        if (json)
        {
            out.printf(Locale.ROOT, "{\"rank\":%d,\"world\":%d,\"mode\":\"%s\",\"type\":\"%s\",\"size\":%d," +
                "\"iterations\":%d,\"matched\":%d,\"ok\":%s,\"mean_ms\":%.4f,\"best_ms\":%.4f,\"goodput_gbps\":%.4f," +
                "\"rdma_bytes_sent\":%d,\"wire_bytes_sent\":%d,\"retransmitted_packets\":%d,\"timeouts\":%d," +
                "\"first_mismatch\":%s,\"error\":%s,\"rx_ring_dropped\":%d,\"call_ms\":[%s],\"cpu_ms\":[%s]," +
                "\"call_start_ns\":[%s],\"endpoint_nice\":%s}%n",
                rank, world,
                netreduce ? "netreduce" : "ring",
                elementType.cliName(), bytes, iterations, matched, ok,
                meanMs(totalSeconds, completed), bestSeconds == Double.MAX_VALUE ? 0.0 : bestSeconds * 1e3,
                totalSeconds > 0 ? (double)bytes * completed * 8 / totalSeconds / 1e9 : 0.0, posted, wire,
                send.retransmittedPackets(), send.timeouts(), jsonString(firstMismatch), jsonString(error), rxDropped,
                callMs, cpuMs, callStartNs, endpointNiceApplied ? Integer.toString(endpointNice) : "null");
        }
        return ok ? 0 : 1;
    }

    private static double meanMs(final double totalSeconds, final int count)
    {
        return count > 0 ? totalSeconds * 1e3 / count : 0.0;
    }

    /**
     * @return null if every local worker's tensor holds the exact hierarchical sum (one rack per host), else a
     *         description of the first element that does not.
     */
    private String checkParallel(
        final Tensor[] tensors, final ElementType elementType, final int elements, final int[] hostFirst,
        final int iteration)
    {
        final int n = tensors.length;
        final Arithmetic.Inputs inputs = (r, index) -> TensorPattern.bits(elementType, seed, r, iteration, index);
        for (int e = 0; e < elements; e++)
        {
            final int expected = Arithmetic.hierarchicalSum(elementType, world * n, hostFirst, inputs, e);
            for (int j = 0; j < n; j++)
            {
                final int actual = Arithmetic.get(tensors[j], e);
                if (actual != expected)
                {
                    return String.format(Locale.ROOT, "local worker %d element %d: expected 0x%08x got 0x%08x", j, e,
                        expected, actual);
                }
            }
        }
        return null;
    }

    /**
     * Run the benchmark's own work between calls (filling the next input, checking a result against a reference sum
     * recomputed from every rank's pattern: 64 MiB of scalar work) on a thread at the process's nice value, while the
     * endpoint's thread waits: at --endpoint-nice it would take the trainer's CPU for work a trainer does not do.
     */
    private <T> T offEndpointThread(final java.util.concurrent.Callable<T> work)
    {
        try
        {
            return checker.submit(work).get();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", ex);
        }
        catch (final java.util.concurrent.ExecutionException ex)
        {
            throw ex.getCause() instanceof RuntimeException runtime ? runtime :
                new IllegalStateException(ex.getCause());
        }
    }

    private void offEndpointThread(final Runnable work)
    {
        offEndpointThread(() ->
        {
            work.run();
            return null;
        });
    }

    /**
     * @return null if every element is the exact expected sum, else a description of the first that is not.
     */
    private String check(
        final Tensor tensor, final ElementType elementType, final boolean netreduce, final int chunkElements,
        final int iteration)
    {
        final Arithmetic.Inputs inputs = (r, index) -> TensorPattern.bits(elementType, seed, r, iteration, index);
        for (int i = 0; i < tensor.elements(); i++)
        {
            final int expected = !netreduce ? Arithmetic.ringOrderSum(elementType, world, chunkElements, inputs, i) :
                rackFirst != null ? Arithmetic.hierarchicalSum(elementType, world, rackFirst, inputs, i) :
                Arithmetic.rankOrderSum(elementType, world, inputs, i);
            final int actual = Arithmetic.get(tensor, i);
            if (actual != expected)
            {
                return String.format(Locale.ROOT, "element %d: expected 0x%08x (%s) got 0x%08x (%s)", i, expected,
                    Arithmetic.toFloat(elementType, expected), actual, Arithmetic.toFloat(elementType, actual));
            }
        }
        return null;
    }

    private void finish(final RcEndpoint endpoint, final Bootstrap toSuccessor, final Bootstrap fromPredecessor)
    {
        // Keep answering (ACKing retransmissions, forwarding nothing) until both neighbours are done too.
        final CompletableFuture<Void> successorDone = readAsync(toSuccessor);
        final CompletableFuture<Void> predecessorDone = readAsync(fromPredecessor);
        try
        {
            toSuccessor.sendLine("done");
            fromPredecessor.sendLine("done");
        }
        catch (final IOException ignored)
        {
            // a neighbour already gone: nothing left to wait for on that side
        }
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Math.max(timeoutSeconds, 10));
        final IdleStrategy idle = idleStrategy(endpoint);
        while (!(successorDone.isDone() && predecessorDone.isDone()) && System.nanoTime() - deadline < 0)
        {
            idle.idle(endpoint.doWork());
        }
    }

    /**
     * A barrier over the ring's bootstrap connections: an "arrive" token from rank 0 round the ring and back, then a
     * "go" from rank 0 to rank W - 1. While waiting the endpoint keeps running, so a neighbour's last ACKs and
     * retransmissions are still answered.
     */
    private void barrier(final RcEndpoint endpoint, final IdleStrategy idle, final Bootstrap toSuccessor,
        final Bootstrap fromPredecessor, final int iteration) throws IOException
    {
        final String arrive = "arrive " + iteration;
        final String go = "go " + iteration;
        if (rank == 0)
        {
            toSuccessor.sendLine(arrive);
            awaitLine(endpoint, idle, fromPredecessor, arrive);
            toSuccessor.sendLine(go);
        }
        else
        {
            awaitLine(endpoint, idle, fromPredecessor, arrive);
            toSuccessor.sendLine(arrive);
            awaitLine(endpoint, idle, fromPredecessor, go);
            if (rank < world - 1)
            {
                toSuccessor.sendLine(go);
            }
        }
    }

    private void awaitLine(final RcEndpoint endpoint, final IdleStrategy idle, final Bootstrap from,
        final String expected) throws IOException
    {
        final CompletableFuture<String> line = new CompletableFuture<>();
        Thread.ofVirtual().name("allreduce-barrier").start(() ->
        {
            try
            {
                line.complete(from.readLine(Duration.ofSeconds(Math.max(timeoutSeconds, 30))));
            }
            catch (final IOException ex)
            {
                line.completeExceptionally(ex);
            }
        });
        while (!line.isDone())
        {
            idle.idle(endpoint.doWork());
        }
        final String got;
        try
        {
            got = line.join();
        }
        catch (final java.util.concurrent.CompletionException ex)
        {
            throw new IOException("barrier: waiting for '" + expected + "' from the predecessor: " +
                ex.getCause().getMessage(), ex.getCause());
        }
        if (!expected.equals(got))
        {
            throw new IOException("barrier: expected '" + expected + "' from the predecessor, got " +
                (got == null ? "end of stream (or no line in time)" : "'" + got + "'"));
        }
    }

    private static CompletableFuture<Void> readAsync(final Bootstrap bootstrap)
    {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        Thread.ofPlatform().daemon().name("allreduce-done").start(() ->
        {
            try
            {
                bootstrap.readLine();
            }
            catch (final IOException ignored)
            {
                // closed: the neighbour is gone
            }
            done.complete(null);
        });
        return done;
    }

    private static Bootstrap awaitBootstrap(final CompletableFuture<Bootstrap> future, final Duration timeout)
        throws IOException, InterruptedException
    {
        try
        {
            return future.get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
        }
        catch (final ExecutionException ex)
        {
            throw new IOException("predecessor did not connect: " + ex.getCause().getMessage(), ex.getCause());
        }
        catch (final TimeoutException ex)
        {
            throw new IOException("predecessor did not connect within " + timeout, ex);
        }
    }

    private static String requireLine(final Bootstrap bootstrap, final Duration timeout) throws IOException
    {
        final String line = bootstrap.readLine(timeout);
        if (line == null)
        {
            throw new IOException("a neighbour closed the bootstrap connection before sending its parameters");
        }
        return line;
    }

    private static void expectLine(final Bootstrap bootstrap, final String expected, final Duration timeout)
        throws IOException
    {
        final String line = bootstrap.readLine(timeout);
        if (!expected.equals(line))
        {
            throw new IOException("expected '" + expected + "' from a neighbour, got: " + line);
        }
    }

    private List<String> peerHosts() throws IOException
    {
        final List<String> hosts = new ArrayList<>();
        if (peers == null)
        {
            for (int r = 0; r < world; r++)
            {
                hosts.add("10.77.0." + (r + 1));
            }
            return hosts;
        }
        final Path file = Path.of(peers);
        if (Files.isRegularFile(file))
        {
            final String[] byRank = new String[world];
            int next = 0;
            for (final String raw : Files.readAllLines(file, StandardCharsets.UTF_8))
            {
                final String line = raw.strip();
                if (line.isEmpty() || line.startsWith("#"))
                {
                    continue;
                }
                final String[] parts = line.split("\\s+");
                final int r = parts.length >= 2 ? Integer.parseInt(parts[0]) : next;
                if (r < 0 || r >= world)
                {
                    throw new IllegalArgumentException("peers file " + file + ": rank " + r + " outside 0.." +
                        (world - 1));
                }
                byRank[r] = parts.length >= 2 ? parts[1] : parts[0];
                next = r + 1;
            }
            for (int r = 0; r < world; r++)
            {
                if (byRank[r] == null)
                {
                    throw new IllegalArgumentException("peers file " + file + " has no host for rank " + r);
                }
                hosts.add(byRank[r]);
            }
            return hosts;
        }
        for (final String host : peers.split(","))
        {
            hosts.add(host.strip());
        }
        if (hosts.size() != world)
        {
            throw new IllegalArgumentException("--peers lists " + hosts.size() + " hosts for " + world + " ranks");
        }
        return hosts;
    }

    private static String jsonString(final String text)
    {
        if (text == null)
        {
            return "null";
        }
        return '"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }

    /**
     * @return the first IPv4 address of {@code dev} in this network namespace: a worker's default ring address.
     * @throws IllegalArgumentException if there is no such interface or it has no IPv4 address.
     */
    static InetAddress interfaceAddress(final String dev) throws IOException
    {
        final NetworkInterface nif = NetworkInterface.getByName(dev);
        if (nif == null)
        {
            throw new IllegalArgumentException("no interface " + dev + " in this network namespace");
        }
        for (final InetAddress address : nif.inetAddresses().toList())
        {
            if (address instanceof java.net.Inet4Address)
            {
                return address;
            }
        }
        throw new IllegalArgumentException(dev + " has no IPv4 address; pass --ip");
    }
}
