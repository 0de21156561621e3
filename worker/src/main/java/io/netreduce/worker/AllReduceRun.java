package io.netreduce.worker;

import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.host.allreduce.MultiTreeAllReduce;
import io.netreduce.host.allreduce.ParallelAllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.host.rc.TraceRecorder;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.PortCounters;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.PrintStream;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.function.Function;

/**
 * One rank's calls, --iterations of them, once its rings are connected: each fills the input, times the all-reduce
 * and checks the result against the exact sum ({@link ResultCheck}, on the {@link OffEndpointThread}); the report
 * ({@link AllReduceReport}, {@link ParallelReport}) prints them.
 */
final class AllReduceRun
{
    private final AllReduceOptions options;
    private final PrintStream out;
    private final OffEndpointThread checker;
    private final Function<RcEndpoint, IdleStrategy> idleStrategy;
    private final ElementType elementType;
    private final ResultCheck resultCheck;

    /**
     * @param idleStrategy how the rank waits on its endpoint (--idle).
     */
    AllReduceRun(
        final AllReduceOptions options, final PrintStream out, final OffEndpointThread checker,
        final Function<RcEndpoint, IdleStrategy> idleStrategy, final ElementType elementType)
    {
        this.options = options;
        this.out = out;
        this.checker = checker;
        this.idleStrategy = idleStrategy;
        this.elementType = elementType;
        resultCheck = new ResultCheck(elementType, options.seed, options.world);
    }

    /**
     * One ring: every call behind a barrier of the ring's ranks, optionally traced (--trace).
     *
     * @param netreduce NetReduce through the appliance rather than the ring algorithm.
     * @param rackFirst the first rank of each rack (--racks), or null for a flat ring.
     * @return the exit status: 0 if every call's result was exact, else 1.
     */
    int run(
        final AllReduce op, final boolean netreduce, final int[] rackFirst, final int bytes,
        final RingNeighbours neighbours, final boolean endpointNiceApplied) throws IOException
    {
        final int rank = options.rank;
        final int world = options.world;
        final int elements = bytes / elementType.size();
        final Tensor tensor = new Tensor(elementType, new UnsafeBuffer(ByteBuffer.allocateDirect(bytes)), 0, elements);
        final IdleStrategy idle = idleStrategy.apply(op.link().endpoint());
        final int chunkElements = (elements + world - 1) / world;
        final RcEndpoint endpoint = op.link().endpoint();
        final AllReduceReport report = new AllReduceReport(out, options, elementType, netreduce, bytes);
        if (op instanceof NetReduceAllReduce nr)
        {
            report.congestion(nr.congestion());
        }
        else if (op instanceof MultiTreeAllReduce trees)
        {
            report.trees(trees);
        }
        final TraceRecorder trace = options.traceFile == null ? TraceRecorder.OFF : new TraceRecorder(1 << 20);
        endpoint.trace(trace);
        final long bytesBefore = op.bytesPosted();
        final long txBytesBefore = endpoint.port().counters().txBytes();
        if (endpoint.port() instanceof AfPacketPort socket)
        {
            socket.refreshKernelStatistics();
        }
        final long rxDroppedBefore = endpoint.port().counters().get(PortCounters.RX_DROPPED);
        final com.sun.management.OperatingSystemMXBean processCpu =
            (com.sun.management.OperatingSystemMXBean)ManagementFactory.getOperatingSystemMXBean();
        final ThreadMXBean threadCpu = ManagementFactory.getThreadMXBean();
        for (int iteration = 0; iteration < options.iterations; iteration++)
        {
            final int filled = iteration;
            checker.run(() -> TensorPattern.fill(tensor, options.seed, rank, filled));
            // Every rank has checked its last result and filled its next input before any rank times the call, as
            // gloo's benchmark does with dist.barrier(): without it a rank still checking (a scalar reference sum, on
            // the cores the others' calls need) stretched the others' timed calls.
            neighbours.barrier(endpoint, idle, iteration);
            trace.record(endpoint.nanoTime(), TraceRecorder.CALL_STARTED, 0, iteration);
            final long cpuStart = processCpu.getProcessCpuTime();
            final long threadCpuStart = threadCpu.getCurrentThreadCpuTime();
            final long start = System.nanoTime();
            try
            {
                op.allreduce(tensor, idle);
            }
            catch (final AllReduceException ex)
            {
                report.failed(iteration, ex.getMessage());
                break;
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            // The whole process's CPU during the call (its compiler and GC threads too), as gloo's rusage counts.
            final double cpuMillis = (processCpu.getProcessCpuTime() - cpuStart) / 1e6;
            // This thread drove the endpoint: its own CPU, to the nanosecond, is the call's packet work.
            final double endpointCpuMillis = (threadCpu.getCurrentThreadCpuTime() - threadCpuStart) / 1e6;
            trace.record(endpoint.nanoTime(), TraceRecorder.CALL_DONE, 0, iteration);
            report.called(start, seconds, cpuMillis, endpointCpuMillis);
            final int checked = iteration;
            final String mismatch = checker.call(
                () -> resultCheck.check(tensor, netreduce, chunkElements, rackFirst, checked));
            report.checked(iteration, seconds, mismatch);
        }
        if (options.traceFile != null)
        {
            try (Writer writer = Files.newBufferedWriter(options.traceFile))
            {
                trace.writeCsv(writer);
            }
            catch (final IOException ex)
            {
                out.println("cannot write the trace to " + options.traceFile + ": " + ex.getMessage());
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
        return report.summarise(op.link(), posted, wire, rxDropped, endpointNiceApplied);
    }

    /**
     * --local-workers n: parallel NetReduce, n local tensors per call.
     *
     * @return the exit status: 0 if every call's result was exact, else 1.
     */
    int runParallel(final ParallelAllReduce parallel, final RcEndpoint endpoint, final int bytes)
    {
        final int rank = options.rank;
        final int world = options.world;
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
        final IdleStrategy idle = idleStrategy.apply(endpoint);
        final long txBefore = endpoint.port().counters().txBytes();
        final ParallelReport report = new ParallelReport(out, options, elementType, n, bytes);
        for (int iteration = 0; iteration < options.iterations; iteration++)
        {
            final int it = iteration;
            checker.run(() ->
            {
                for (int j = 0; j < n; j++)
                {
                    TensorPattern.fill(tensors[j], options.seed, rank * n + j, it);
                }
            });
            final long start = System.nanoTime();
            try
            {
                parallel.allreduce(idle, tensors);
            }
            catch (final AllReduceException ex)
            {
                report.failed(iteration, ex.getMessage());
                break;
            }
            final double ms = (System.nanoTime() - start) / 1e6;
            report.called(ms, parallel);
            final String mismatch = checker.call(() -> resultCheck.checkParallel(tensors, elements, hostFirst, it));
            report.checked(iteration, ms, parallel, mismatch);
        }
        final long wire = endpoint.port().counters().txBytes() - txBefore;
        return report.summarise(endpoint, wire);
    }
}
