package io.netreduce.worker;

import io.netreduce.host.allreduce.CongestionWindow;
import io.netreduce.host.allreduce.MultiTreeAllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.PacketPort;

import java.io.PrintStream;
import java.util.Locale;

/**
 * What one rank's calls on one ring did, printed as they happen: a line per call, then a summary, the counters of
 * the port, queue pairs and endpoint (for a loss census) and, with --json, one JSON line. The bench scripts and the
 * Python package parse these lines (scripts/bench-allreduce.sh, scripts/bench/, python/netreduce), so their text
 * and the JSON keys are an interface.
 */
final class AllReduceReport
{
    private final PrintStream out;
    private final AllReduceOptions options;
    private final ElementType elementType;
    private final String mode;
    /** What a call whose check passed is said to be: exact, or (SwitchML fp32) within the bound. */
    private final String passed;
    private final int bytes;
    private double totalSeconds;
    private double bestSeconds = Double.MAX_VALUE;
    private int matched;
    private int completed;
    private String firstMismatch;
    private String error;
    private final StringBuilder callMs = new StringBuilder();
    private final StringBuilder cpuMs = new StringBuilder();
    private final StringBuilder endpointCpuMs = new StringBuilder();
    /** Each call's start on CLOCK_MONOTONIC, so the bench can tell what else ran on the host during the calls. */
    private final StringBuilder callStartNs = new StringBuilder();
    /** NetReduce's window (null for the ring and SwitchML): per call the marked results and the smallest window. */
    private CongestionWindow congestion;
    private long markedBefore;
    private final StringBuilder callMarked = new StringBuilder();
    private final StringBuilder callWindowMin = new StringBuilder();
    /** A job over several trees (--trees), or null: each tree's bytes, retransmissions and window in the summary. */
    private MultiTreeAllReduce trees;
    private long[] treeBytesBefore;
    private long[] treeMessagesBefore;

    AllReduceReport(
        final PrintStream out, final AllReduceOptions options, final ElementType elementType, final boolean netreduce,
        final int bytes)
    {
        this(out, options, elementType, netreduce ? "netreduce" : "ring", "exact", bytes);
    }

    /**
     * @param mode   netreduce, ring or switchml.
     * @param passed what a call whose check passed is said to be ("exact", "within bound").
     */
    AllReduceReport(
        final PrintStream out, final AllReduceOptions options, final ElementType elementType, final String mode,
        final String passed, final int bytes)
    {
        this.out = out;
        this.options = options;
        this.elementType = elementType;
        this.mode = mode;
        this.passed = passed;
        this.bytes = bytes;
    }

    /**
     * Report NetReduce's window too: per call (marked results, smallest window) and in the summary.
     */
    void congestion(final CongestionWindow window)
    {
        congestion = window;
        markedBefore = window.markedResults();
        window.takeMinWindow();
    }

    /**
     * Report each tree of a job over several trees: its ring, the messages and bytes it carried, its retransmissions
     * and its window, in the summary and the JSON's {@code trees} list.
     */
    void trees(final MultiTreeAllReduce job)
    {
        trees = job;
        treeBytesBefore = new long[job.treeCount()];
        treeMessagesBefore = new long[job.treeCount()];
        for (int t = 0; t < job.treeCount(); t++)
        {
            treeBytesBefore[t] = job.tree(t).bytesPosted();
            treeMessagesBefore[t] = job.tree(t).messagesPosted();
            job.tree(t).congestion().takeMinWindow();
        }
    }

    /**
     * A call failed: the calls end here.
     */
    void failed(final int iteration, final String message)
    {
        error = message;
        out.println("iteration " + iteration + " FAILED: " + error);
    }

    /**
     * @param startNs   when the call started, on System.nanoTime's clock (CLOCK_MONOTONIC).
     * @param seconds   how long it took.
     * @param cpuMillis the whole process's CPU time during the call.
     * @param endpointCpuMillis the CPU time of the thread that drove the endpoint through the call (its packet
     *                  work, to the nanosecond, where the process's count comes in the kernel's ticks and includes
     *                  the JIT's and the collector's threads).
     */
    void called(final long startNs, final double seconds, final double cpuMillis, final double endpointCpuMillis)
    {
        callMs.append(callMs.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", seconds * 1e3));
        cpuMs.append(cpuMs.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", cpuMillis));
        endpointCpuMs.append(endpointCpuMs.isEmpty() ? "" : ",")
            .append(String.format(Locale.ROOT, "%.3f", endpointCpuMillis));
        callStartNs.append(callStartNs.isEmpty() ? "" : ",").append(startNs);
        totalSeconds += seconds;
        completed++;
        if (congestion != null)
        {
            callMarked.append(callMarked.isEmpty() ? "" : ",").append(congestion.markedResults() - markedBefore);
            markedBefore = congestion.markedResults();
            callWindowMin.append(callWindowMin.isEmpty() ? "" : ",").append(congestion.takeMinWindow());
        }
        bestSeconds = Math.min(bestSeconds, seconds);
    }

    /**
     * @param mismatch the call's first wrong element, or null if its result was exact.
     */
    void checked(final int iteration, final double seconds, final String mismatch)
    {
        if (mismatch == null)
        {
            matched++;
        }
        else if (firstMismatch == null)
        {
            firstMismatch = mismatch;
        }
        out.printf(Locale.ROOT, "iteration %d rank %d %s %s %d bytes: %.3f ms, goodput %.3f Gbit/s, result: %s%n",
            iteration, options.rank, mode(), elementType.cliName(), bytes, seconds * 1e3,
            bytes * 8.0 / seconds / 1e9, mismatch == null ? passed : "MISMATCH " + mismatch);
    }

    /**
     * Print the summary, the counters and (with --json) the JSON line.
     *
     * @param posted              RDMA payload bytes the calls posted.
     * @param wire                bytes the port sent during the calls.
     * @param rxDropped           frames the kernel dropped during the calls because the receive ring was full.
     * @param endpointNiceApplied whether the endpoint's thread runs at --endpoint-nice.
     * @return the exit status: 0 if every call's result was exact, else 1.
     */
    int summarise(
        final RingLink link, final long posted, final long wire, final long rxDropped,
        final boolean endpointNiceApplied)
    {
        final RcEndpoint endpoint = link.endpoint();
        final var send = link.sendQp().counters();
        long retransmitted = send.retransmittedPackets();
        long timeouts = send.timeouts();
        if (trees != null)
        {
            retransmitted = 0;
            timeouts = 0;
            for (int t = 0; t < trees.treeCount(); t++)
            {
                retransmitted += trees.tree(t).link().sendQp().counters().retransmittedPackets();
                timeouts += trees.tree(t).link().sendQp().counters().timeouts();
            }
        }
        final boolean ok = error == null && matched == options.iterations;
        out.printf(Locale.ROOT, "summary rank %d mode %s type %s size %d iterations %d matched %d: mean %.3f ms, " +
            "best %.3f ms, goodput %.3f Gbit/s, rdma payload sent %d bytes (%.3f x tensor per call), wire bytes " +
            "sent %d, retransmitted packets %d, timeouts %d, result: %s%n", options.rank, mode(),
            elementType.cliName(), bytes, options.iterations, matched, meanMs(totalSeconds, completed),
            bestSeconds == Double.MAX_VALUE ? 0.0 : bestSeconds * 1e3,
            totalSeconds > 0 ? (double)bytes * completed * 8 / totalSeconds / 1e9 : 0.0, posted,
            completed > 0 ? posted / (double)bytes / completed : 0.0, wire, retransmitted,
            timeouts, ok ? passed : error != null ? "error" : "mismatch");
        // The port's counters, for a loss census: frames the port could not take or deliver whole.
        out.printf(Locale.ROOT, "port %s: %s%n", endpoint.port().name(), endpoint.port().counters());
        out.printf(Locale.ROOT, "send qp: %s%nreceive qp: %s%n", send, link.receiveQp().counters());
        out.printf(Locale.ROOT, "endpoint %s: framesReceived=%d notRoce=%d malformed=%d notForUs=%d unknownQp=%d " +
            "icrcErrors=%d%n", endpoint.port().name(), endpoint.framesReceived(), endpoint.notRoce(),
            endpoint.malformed(), endpoint.notForUs(), endpoint.unknownQp(), endpoint.icrcErrors());
        if (congestion != null)
        {
            out.printf(Locale.ROOT, "congestion control %s (g %.4f, floor %d): window %d of %d (smallest %d), " +
                "alpha %.4f, marked results %d of %d, windows cut %d, grown %d%n", congestion.enabled() ? "on" : "off",
                congestion.gain(), congestion.floor(), congestion.window(), congestion.cap(), congestion.minWindow(), congestion.alpha(),
                congestion.markedResults(), congestion.results(), congestion.decreases(), congestion.increases());
        }
        if (trees != null)
        {
            for (int t = 0; t < trees.treeCount(); t++)
            {
                final NetReduceAllReduce tree = trees.tree(t);
                final CongestionWindow window = tree.congestion();
                out.printf(Locale.ROOT, "tree %d ring %d (udp source port %d): messages %d, rdma payload sent %d " +
                    "bytes (%.3f of the job's), retransmitted packets %d, timeouts %d, window %d of %d (smallest %d), " +
                    "alpha %.4f, marked results %d of %d%n", t, tree.config().ringId(),
                    tree.link().sendQp().udpSourcePort(), tree.messagesPosted() - treeMessagesBefore[t],
                    tree.bytesPosted() - treeBytesBefore[t],
                    posted > 0 ? (tree.bytesPosted() - treeBytesBefore[t]) / (double)posted : 0.0,
                    tree.link().sendQp().counters().retransmittedPackets(), tree.link().sendQp().counters().timeouts(),
                    window.window(), window.cap(), window.minWindow(), window.alpha(), window.markedResults(),
                    window.results());
            }
        }
        if (options.json)
        {
            out.printf(Locale.ROOT, "{\"rank\":%d,\"world\":%d,\"mode\":\"%s\",\"type\":\"%s\",\"size\":%d," +
                "\"iterations\":%d,\"matched\":%d,\"ok\":%s,\"mean_ms\":%.4f,\"best_ms\":%.4f,\"goodput_gbps\":%.4f," +
                "\"rdma_bytes_sent\":%d,\"wire_bytes_sent\":%d,\"retransmitted_packets\":%d,\"timeouts\":%d," +
                "\"first_mismatch\":%s,\"error\":%s,\"rx_ring_dropped\":%d,\"call_ms\":[%s],\"cpu_ms\":[%s]," +
                "\"endpoint_cpu_ms\":[%s],\"call_start_ns\":[%s],\"endpoint_nice\":%s%s%s}%n",
                options.rank, options.world,
                mode(),
                elementType.cliName(), bytes, options.iterations, matched, ok,
                meanMs(totalSeconds, completed), bestSeconds == Double.MAX_VALUE ? 0.0 : bestSeconds * 1e3,
                totalSeconds > 0 ? (double)bytes * completed * 8 / totalSeconds / 1e9 : 0.0, posted, wire,
                retransmitted, timeouts, jsonString(firstMismatch), jsonString(error), rxDropped,
                callMs, cpuMs, endpointCpuMs, callStartNs,
                endpointNiceApplied ? Integer.toString(options.endpointNice) : "null", congestionJson(), treesJson());
        }
        return ok ? 0 : 1;
    }

    /**
     * @return {@code ,"trees":[{...}, ...]}: per tree its ring, messages, RDMA payload bytes, retransmissions and
     * window during the calls; empty for a job on one tree.
     */
    private String treesJson()
    {
        if (trees == null)
        {
            return "";
        }
        final StringBuilder json = new StringBuilder(",\"trees\":[");
        for (int t = 0; t < trees.treeCount(); t++)
        {
            final NetReduceAllReduce tree = trees.tree(t);
            final CongestionWindow window = tree.congestion();
            json.append(t == 0 ? "" : ",").append(String.format(Locale.ROOT, "{\"tree\":%d,\"ring\":%d," +
                "\"udp_source_port\":%d,\"messages\":%d,\"rdma_bytes_sent\":%d,\"retransmitted_packets\":%d," +
                "\"timeouts\":%d,\"window\":%d,\"cap\":%d,\"window_min\":%d,\"alpha\":%.6f,\"results\":%d," +
                "\"marked_results\":%d}", t, tree.config().ringId(), tree.link().sendQp().udpSourcePort(),
                tree.messagesPosted() - treeMessagesBefore[t], tree.bytesPosted() - treeBytesBefore[t],
                tree.link().sendQp().counters().retransmittedPackets(), tree.link().sendQp().counters().timeouts(),
                window.window(), window.cap(), window.minWindow(), window.alpha(), window.results(),
                window.markedResults()));
        }
        return json.append(']').toString();
    }

    /**
     * @return {@code ,"ecn":{...}}: NetReduce's window at the end, its extremes and per-call figures; empty for
     * the ring.
     */
    private String congestionJson()
    {
        if (congestion == null)
        {
            return "";
        }
        return String.format(Locale.ROOT, ",\"ecn\":{\"enabled\":%s,\"gain\":%.6f,\"floor\":%d,\"window\":%d," +
            "\"cap\":%d,\"window_min\":%d,\"alpha\":%.6f,\"results\":%d,\"marked_results\":%d,\"window_cuts\":%d," +
            "\"window_growths\":%d,\"call_marked\":[%s],\"call_window_min\":[%s]}", congestion.enabled(),
            congestion.gain(), congestion.floor(), congestion.window(), congestion.cap(), congestion.minWindow(),
            congestion.alpha(), congestion.results(), congestion.markedResults(), congestion.decreases(), congestion.increases(),
            callMarked, callWindowMin);
    }

    /**
     * The summary of SwitchML calls (no RC connection): the same call figures, the frames and bytes this worker sent
     * (retransmissions included), the retransmissions (each one a timeout) and the results it did not use.
     *
     * @param wire            frame bytes the port sent during the calls.
     * @param framesSent      frames the worker sent during the calls.
     * @param retransmissions packets sent again after the timeout.
     * @param strayResults    results that answered nothing in flight (duplicates, an earlier call's).
     * @param rxDropped       frames the kernel dropped during the calls because the receive ring was full.
     * @return the exit status: 0 if every call's result passed its check, else 1.
     */
    int summariseSwitchMl(
        final PacketPort port, final long wire, final long framesSent, final long retransmissions,
        final long strayResults, final long rxDropped, final boolean endpointNiceApplied)
    {
        final boolean ok = error == null && matched == options.iterations;
        out.printf(Locale.ROOT, "summary rank %d mode %s type %s size %d iterations %d matched %d: mean %.3f ms, " +
            "best %.3f ms, goodput %.3f Gbit/s, wire bytes sent %d (%.3f x tensor per call), frames sent %d, " +
            "retransmitted packets %d, stray results %d, result: %s%n", options.rank, mode(), elementType.cliName(),
            bytes, options.iterations, matched, meanMs(totalSeconds, completed), bestMs(), goodputGbps(), wire,
            completed > 0 ? wire / (double)bytes / completed : 0.0, framesSent, retransmissions, strayResults,
            ok ? passed : error != null ? "error" : "mismatch");
        out.printf(Locale.ROOT, "port %s: %s%n", port.name(), port.counters());
        if (options.json)
        {
            out.printf(Locale.ROOT, "{\"rank\":%d,\"world\":%d,\"mode\":\"%s\",\"type\":\"%s\",\"size\":%d," +
                "\"iterations\":%d,\"matched\":%d,\"ok\":%s,\"mean_ms\":%.4f,\"best_ms\":%.4f,\"goodput_gbps\":%.4f," +
                "\"wire_bytes_sent\":%d,\"payload_bytes_sent\":%d,\"frames_sent\":%d," +
                "\"retransmitted_packets\":%d,\"timeouts\":%d," +
                "\"stray_results\":%d,\"first_mismatch\":%s,\"error\":%s,\"rx_ring_dropped\":%d,\"call_ms\":[%s]," +
                "\"cpu_ms\":[%s],\"endpoint_cpu_ms\":[%s],\"call_start_ns\":[%s],\"endpoint_nice\":%s}%n",
                options.rank, options.world, mode(), elementType.cliName(), bytes, options.iterations, matched, ok,
                meanMs(totalSeconds, completed), bestMs(), goodputGbps(), wire,
                framesSent * options.elements * (long)Integer.BYTES, framesSent, retransmissions,
                retransmissions, strayResults, jsonString(firstMismatch), jsonString(error), rxDropped, callMs, cpuMs,
                endpointCpuMs, callStartNs, endpointNiceApplied ? Integer.toString(options.endpointNice) : "null");
        }
        return ok ? 0 : 1;
    }

    private String mode()
    {
        return mode;
    }

    private double bestMs()
    {
        return bestSeconds == Double.MAX_VALUE ? 0.0 : bestSeconds * 1e3;
    }

    private double goodputGbps()
    {
        return totalSeconds > 0 ? (double)bytes * completed * 8 / totalSeconds / 1e9 : 0.0;
    }

    private static double meanMs(final double totalSeconds, final int count)
    {
        return count > 0 ? totalSeconds * 1e3 / count : 0.0;
    }

    /**
     * @return {@code text} as a JSON string, or null.
     */
    static String jsonString(final String text)
    {
        if (text == null)
        {
            return "null";
        }
        return '"' + text.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }
}
