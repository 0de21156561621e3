package io.netreduce.worker;

import io.netreduce.host.allreduce.ParallelAllReduce;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.Locale;

/**
 * What one host's parallel NetReduce calls (--local-workers) did, printed as they happen: a line per call with its
 * phases, then a summary, the port's counters and, with --json, one JSON line (scripts/bench-parallel.sh parses it).
 */
final class ParallelReport
{
    private final PrintStream out;
    private final AllReduceOptions options;
    private final ElementType elementType;
    private final int localWorkers;
    private final int bytes;
    private final double[] callMs;
    private final StringBuilder calls = new StringBuilder();
    private final StringBuilder phases = new StringBuilder();
    private int completed;
    private int matched;
    private String error;
    private String firstMismatch;

    ParallelReport(
        final PrintStream out, final AllReduceOptions options, final ElementType elementType, final int localWorkers,
        final int bytes)
    {
        this.out = out;
        this.options = options;
        this.elementType = elementType;
        this.localWorkers = localWorkers;
        this.bytes = bytes;
        callMs = new double[options.iterations];
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
     * @param ms how long the call took; its phases are the parallel all-reduce's.
     */
    void called(final double ms, final ParallelAllReduce parallel)
    {
        callMs[completed++] = ms;
        calls.append(calls.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.3f", ms));
        phases.append(phases.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "[%.3f,%.3f,%.3f]",
            parallel.reduceScatterNs() / 1e6, parallel.ringNs() / 1e6, parallel.allGatherNs() / 1e6));
    }

    /**
     * @param mismatch the call's first wrong element, or null if every local worker's result was exact.
     */
    void checked(final int iteration, final double ms, final ParallelAllReduce parallel, final String mismatch)
    {
        if (mismatch == null)
        {
            matched++;
        }
        else if (firstMismatch == null)
        {
            firstMismatch = mismatch;
        }
        out.printf(Locale.ROOT, "iteration %d host %d parallel x%d %s %d bytes: %.3f ms (reduce-scatter %.3f, " +
            "rings %.3f, all-gather %.3f), goodput %.3f Gbit/s, result: %s%n", iteration, options.rank, localWorkers,
            elementType.cliName(), bytes, ms, parallel.reduceScatterNs() / 1e6, parallel.ringNs() / 1e6,
            parallel.allGatherNs() / 1e6, bytes * 8 / ms / 1e6, mismatch == null ? "exact" : "MISMATCH " +
            mismatch);
    }

    /**
     * Print the summary, the port's counters and (with --json) the JSON line.
     *
     * @param wire bytes the port sent during the calls.
     * @return the exit status: 0 if every call's result was exact, else 1.
     */
    int summarise(final RcEndpoint endpoint, final long wire)
    {
        final double[] sorted = Arrays.copyOf(callMs, completed);
        Arrays.sort(sorted);
        final double median = completed == 0 ? 0 : sorted[completed / 2];
        final boolean ok = error == null && matched == options.iterations;
        out.printf(Locale.ROOT, "summary host %d mode parallel local-workers %d type %s size %d iterations %d " +
            "matched %d: median %.3f ms, wire bytes sent %d, result: %s%n", options.rank, localWorkers,
            elementType.cliName(), bytes, options.iterations, matched, median, wire,
            ok ? "exact" : error != null ? "error" : "mismatch");
        // The port's counters, for a loss census: frames the port could not take or deliver whole.
        out.printf(Locale.ROOT, "port %s: %s%n", endpoint.port().name(), endpoint.port().counters());
        if (options.json)
        {
            out.printf(Locale.ROOT, "{\"rank\":%d,\"world\":%d,\"mode\":\"parallel\",\"local_workers\":%d," +
                "\"type\":\"%s\",\"size\":%d,\"iterations\":%d,\"matched\":%d,\"ok\":%s,\"median_ms\":%.4f," +
                "\"wire_bytes_sent\":%d,\"first_mismatch\":%s,\"error\":%s,\"call_ms\":[%s]," +
                "\"phases_ms\":[%s]}%n", options.rank, options.world, localWorkers, elementType.cliName(), bytes,
                options.iterations, matched, ok, median, wire, AllReduceReport.jsonString(firstMismatch),
                AllReduceReport.jsonString(error), calls, phases);
        }
        return ok ? 0 : 1;
    }
}
