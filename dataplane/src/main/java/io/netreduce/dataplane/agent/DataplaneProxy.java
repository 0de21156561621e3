package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.concurrent.ManyToOneConcurrentArrayQueue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The control plane's side of the dataplane: every method is safe to call from any thread, never blocks, and
 * returns a future the dataplane completes when it has applied the command between two batches (wait on it
 * with a timeout). When the command queue is full the future fails at once with
 * {@link IllegalStateException}; refusals (bad config, unknown ring, no memory) fail it with
 * {@link IllegalArgumentException} carrying the reason.
 * <p>
 * Counters and the latency histogram are read directly, without a command.
 */
public final class DataplaneProxy
{
    private final ManyToOneConcurrentArrayQueue<DataplaneCommand> commands;
    private final DataplaneCounters counters;
    private final SingleWriterRecorder latency;
    private final ForeignTagEvents foreignTags;
    private final Histogram accumulated;

    DataplaneProxy(
        final ManyToOneConcurrentArrayQueue<DataplaneCommand> commands,
        final DataplaneCounters counters,
        final SingleWriterRecorder latency,
        final ForeignTagEvents foreignTags)
    {
        this.commands = commands;
        this.counters = counters;
        this.latency = latency;
        this.foreignTags = foreignTags;
        this.accumulated = new Histogram(latency.getIntervalHistogram().getHighestTrackableValue(), 3);
    }

    /**
     * Hand the connections seen on a ring edge without the ring's InetTag since the last call to
     * {@code consumer}, one event per connection (one control-side thread only).
     *
     * @return events drained.
     */
    public int drainForeignTags(final Consumer<ForeignTagEvents.Event> consumer)
    {
        return foreignTags.drain(consumer);
    }

    public CompletableFuture<RingInstalled> installRing(final RingDefinition config)
    {
        final CompletableFuture<RingInstalled> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.InstallRing(config, reply), reply);
    }

    public CompletableFuture<RingRemoved> removeRing(final int ringId)
    {
        final CompletableFuture<RingRemoved> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.RemoveRing(ringId, reply), reply);
    }

    public CompletableFuture<List<ConnectionEntry>> connections()
    {
        final CompletableFuture<List<ConnectionEntry>> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.SnapshotConnections(reply), reply);
    }

    /**
     * @param limit how many of the oldest incomplete aggregators to list.
     */
    public CompletableFuture<AggregatorUsage> occupancy(final int ringId, final int limit)
    {
        final CompletableFuture<AggregatorUsage> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.SnapshotRing(ringId, limit, reply), reply);
    }

    public CompletableFuture<List<RingInstalled>> rings()
    {
        final CompletableFuture<List<RingInstalled>> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.ListRings(reply), reply);
    }

    /**
     * Install a capture tap; the reply completes once the dataplane copies frames into it.
     */
    public CompletableFuture<CaptureTap> startCapture(final CaptureTap tap)
    {
        final CompletableFuture<CaptureTap> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.StartCapture(tap, reply), reply);
    }

    /**
     * Remove a capture tap; once the reply completes the dataplane no longer writes to its ring, so the writer
     * can drain what is left and close the file.
     */
    public CompletableFuture<CaptureTap> stopCapture(final int captureId)
    {
        final CompletableFuture<CaptureTap> reply = new CompletableFuture<>();
        return offer(new DataplaneCommand.StopCapture(captureId, reply), reply);
    }

    public long counter(final DataplaneCounter counter)
    {
        return counters.get(counter);
    }

    /**
     * @return every counter's label and value.
     */
    public Map<String, Long> counters()
    {
        return counters.snapshot();
    }

    public DataplaneCounters counterBuffers()
    {
        return counters;
    }

    /**
     * @return a copy of the aggregation latency histogram (first packet in to results out, nanoseconds) since
     * the dataplane started. Callers are serialised.
     */
    public synchronized Histogram latency()
    {
        accumulated.add(latency.getIntervalHistogram());
        return accumulated.copy();
    }

    private <T> CompletableFuture<T> offer(final DataplaneCommand command, final CompletableFuture<T> reply)
    {
        if (!commands.offer(command))
        {
            reply.completeExceptionally(new IllegalStateException("dataplane command queue full"));
        }
        return reply;
    }
}
