package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.dataplane.switchml.SwitchMlJobView;
import org.HdrHistogram.Histogram;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * The control plane's side of the dataplane, over all its lanes: every method is safe to call from any thread,
 * never blocks on the dataplane, and returns a future that the owning lane(s) complete when they have applied the
 * command between two batches (wait on it with a timeout). When a command queue is full the future fails at once
 * with {@link IllegalStateException}; refusals (bad config, unknown ring, no memory, a ring no lane can take) fail it
 * with {@link IllegalArgumentException} carrying the reason.
 * <p>
 * A ring command goes to the lane that owns the ring ({@link LaneAssignment}); table snapshots and captures go to
 * every lane and are merged. Installing a ring first steers its edges to its lane ({@link LaneSteering}), then
 * installs it there; removing it removes it, then steers its edges away. Counters and the latency histogram are
 * read directly, summed over lanes, without a command.
 */
public final class DataplaneProxy
{
    private final LaneHandle[] lanes;
    private final LaneAssignment assignment;
    private final LaneSteering steering;
    private final Histogram accumulated;

    DataplaneProxy(final List<LaneHandle> lanes, final long memoryBudget, final LaneSteering steering)
    {
        this.lanes = lanes.toArray(new LaneHandle[0]);
        this.assignment = new LaneAssignment(this.lanes.length, memoryBudget);
        this.steering = steering;
        this.accumulated = new Histogram(this.lanes[0].latency().getIntervalHistogram().getHighestTrackableValue(), 3);
    }

    /**
     * @return how many lanes (agents) the dataplane runs.
     */
    public int lanes()
    {
        return lanes.length;
    }

    /**
     * @return the lane that owns the ring, or -1 if it is not installed (or its install is still under way).
     */
    public synchronized int laneOf(final int ringId)
    {
        return assignment.laneOf(ringId);
    }

    /**
     * Hand the connections seen on a ring edge without the ring's InetTag since the last call to
     * {@code consumer}, one event per connection (one control-side thread only).
     *
     * @return events drained.
     */
    public int drainForeignTags(final Consumer<ForeignTagEvents.Event> consumer)
    {
        int drained = 0;
        for (final LaneHandle lane : lanes)
        {
            drained += lane.foreignTags().drain(consumer);
        }
        return drained;
    }

    /**
     * Install a ring on the lane {@link LaneAssignment} chooses.
     */
    public CompletableFuture<RingInstalled> installRing(final RingDefinition config)
    {
        return installRing(config, -1);
    }

    /**
     * Install a ring on a given lane (-1: let the assignment choose), for tests and benchmarks that feed lanes
     * themselves.
     */
    public CompletableFuture<RingInstalled> installRing(final RingDefinition config, final int requestedLane)
    {
        final CompletableFuture<RingInstalled> reply = new CompletableFuture<>();
        final int lane;
        synchronized (this)
        {
            try
            {
                config.validate();
                lane = assignment.place(config, requestedLane);
            }
            catch (final IllegalArgumentException ex)
            {
                reply.completeExceptionally(ex);
                return reply;
            }
            try
            {
                steering.steer(assignment.routes());
            }
            catch (final RuntimeException ex)
            {
                assignment.release(config.ringId());
                reply.completeExceptionally(ex instanceof IllegalArgumentException ? ex :
                    new IllegalStateException("steering ring " + config.ringId() + " to lane " + lane + ": " +
                        ex.getMessage(), ex));
                return reply;
            }
        }
        final CompletableFuture<RingInstalled> laneReply = new CompletableFuture<>();
        offer(lanes[lane], new DataplaneCommand.InstallRing(config, laneReply), laneReply);
        // Runs on the lane's thread, which completes laneReply: the caller's reply is then complete as soon as the
        // lane has applied the command (tests drive a lane and expect that). The lane holds the proxy's lock only for
        // this bookkeeping, and steers (a setsockopt) only when the install failed; commands are rare.
        laneReply.whenComplete((installed, failure) ->
        {
            if (failure != null)
            {
                synchronized (this)
                {
                    assignment.release(config.ringId());
                    steerQuietly();
                }
                reply.completeExceptionally(failure);
            }
            else
            {
                final long used;
                synchronized (this)
                {
                    used = assignment.memoryUsed();
                }
                reply.complete(installed.onLane(lane, used));
            }
        });
        return reply;
    }

    public CompletableFuture<RingRemoved> removeRing(final int ringId)
    {
        final int lane;
        synchronized (this)
        {
            lane = assignment.laneOf(ringId);
        }
        final CompletableFuture<RingRemoved> reply = new CompletableFuture<>();
        // A ring no lane owns: lane 0 answers with the dataplane's own "not installed" refusal.
        offer(lanes[Math.max(lane, 0)], new DataplaneCommand.RemoveRing(ringId, reply), reply);
        if (lane < 0)
        {
            return reply;
        }
        return reply.thenApply(removed ->
        {
            synchronized (this)
            {
                assignment.release(ringId);
                steerQuietly();
            }
            return removed;
        });
    }

    public CompletableFuture<List<ConnectionEntry>> connections()
    {
        return everyLane(DataplaneCommand.SnapshotConnections::new, replies ->
        {
            final List<ConnectionEntry> all = new ArrayList<>();
            replies.forEach(all::addAll);
            return all;
        });
    }

    /**
     * @param limit how many of the oldest incomplete aggregators to list.
     */
    public CompletableFuture<AggregatorUsage> occupancy(final int ringId, final int limit)
    {
        final int lane;
        synchronized (this)
        {
            lane = Math.max(assignment.laneOf(ringId), 0);
        }
        final CompletableFuture<AggregatorUsage> reply = new CompletableFuture<>();
        return offer(lanes[lane], new DataplaneCommand.SnapshotRing(ringId, limit, reply), reply);
    }

    public CompletableFuture<List<RingInstalled>> rings()
    {
        return everyLane(DataplaneCommand.ListRings::new, perLane ->
        {
            final List<RingInstalled> all = new ArrayList<>();
            final long used;
            synchronized (this)
            {
                used = assignment.memoryUsed();
            }
            for (int lane = 0; lane < perLane.size(); lane++)
            {
                for (final RingInstalled ring : perLane.get(lane))
                {
                    all.add(ring.onLane(lane, used));
                }
            }
            all.sort(Comparator.comparingInt(RingInstalled::ringId));
            return all;
        });
    }

    /**
     * Install a SwitchML job. SwitchML jobs live on lane 0 and need a dataplane of one lane: the lanes' kernel
     * steering places frames by ring edges, and a job's frames spread over lanes would split its slots.
     */
    public CompletableFuture<SwitchMlJobView> installSwitchMlJob(final SwitchMlJobDefinition definition)
    {
        final CompletableFuture<SwitchMlJobView> reply = new CompletableFuture<>();
        if (lanes.length != 1)
        {
            reply.completeExceptionally(new IllegalArgumentException("SwitchML job " + definition.job() + " needs " +
                "appliance.dataplane.lanes: 1 (this dataplane has " + lanes.length + " lanes; the kernel's lane " +
                "steering knows NetReduce ring edges only)"));
            return reply;
        }
        return offer(lanes[0], new DataplaneCommand.InstallSwitchMlJob(definition, reply), reply);
    }

    /**
     * Forget every slot state of a SwitchML job.
     */
    public CompletableFuture<SwitchMlJobView> resetSwitchMlJob(final int job)
    {
        final CompletableFuture<SwitchMlJobView> reply = new CompletableFuture<>();
        return offer(lanes[0], new DataplaneCommand.ResetSwitchMlJob(job, reply), reply);
    }

    public CompletableFuture<SwitchMlJobView> removeSwitchMlJob(final int job)
    {
        final CompletableFuture<SwitchMlJobView> reply = new CompletableFuture<>();
        return offer(lanes[0], new DataplaneCommand.RemoveSwitchMlJob(job, reply), reply);
    }

    public CompletableFuture<List<SwitchMlJobView>> switchMlJobs()
    {
        final CompletableFuture<List<SwitchMlJobView>> reply = new CompletableFuture<>();
        return offer(lanes[0], new DataplaneCommand.ListSwitchMlJobs(reply), reply);
    }

    /**
     * Install a capture tap on every lane; the reply completes once every lane copies frames into it.
     */
    public CompletableFuture<CaptureTap> startCapture(final CaptureTap tap)
    {
        return this.<CaptureTap, CaptureTap>everyLane(reply -> new DataplaneCommand.StartCapture(tap, reply), taps -> tap);
    }

    /**
     * Remove a capture tap from every lane; once the reply completes no lane writes to its ring any more, so the
     * writer can drain what is left and close the file.
     */
    public CompletableFuture<CaptureTap> stopCapture(final int captureId)
    {
        return this.<CaptureTap, CaptureTap>everyLane(
            reply -> new DataplaneCommand.StopCapture(captureId, reply), List::getFirst);
    }

    /**
     * @return the counter summed over every lane.
     */
    public long counter(final DataplaneCounter counter)
    {
        long sum = 0;
        for (final LaneHandle lane : lanes)
        {
            sum += lane.counters().get(counter);
        }
        return sum;
    }

    /**
     * @return every dataplane counter's label and value, summed over lanes.
     */
    public Map<String, Long> counters()
    {
        final Map<String, Long> sum = new LinkedHashMap<>();
        for (final LaneHandle lane : lanes)
        {
            lane.counters().snapshot().forEach((label, value) -> sum.merge(label, value, Long::sum));
        }
        return sum;
    }

    /**
     * @return each lane's counter buffers (a ring's counters are in its lane's), by lane.
     */
    public List<DataplaneCounters> laneCounters()
    {
        final List<DataplaneCounters> counters = new ArrayList<>(lanes.length);
        for (final LaneHandle lane : lanes)
        {
            counters.add(lane.counters());
        }
        return counters;
    }

    /**
     * @return a copy of the aggregation latency histogram (first packet in to results out, nanoseconds) of every
     * lane since the dataplane started. Callers are serialised.
     */
    public synchronized Histogram latency()
    {
        for (final LaneHandle lane : lanes)
        {
            accumulated.add(lane.latency().getIntervalHistogram());
        }
        return accumulated.copy();
    }

    private void steerQuietly()
    {
        try
        {
            steering.steer(assignment.routes());
        }
        catch (final RuntimeException ex)
        {
            // Fewer routes than a program that was accepted: cannot be too long. A kernel refusal leaves the
            // previous program, which only sends a removed ring's frames to a lane that no longer knows the ring:
            // they pass through, as they would on any lane.
        }
    }

    /**
     * Send one command per lane, each with its own reply, and combine the replies once all have come.
     */
    private <T, R> CompletableFuture<R> everyLane(
        final Function<CompletableFuture<T>, DataplaneCommand> command, final Function<List<T>, R> combine)
    {
        final List<CompletableFuture<T>> replies = new ArrayList<>(lanes.length);
        for (final LaneHandle lane : lanes)
        {
            final CompletableFuture<T> reply = new CompletableFuture<>();
            replies.add(offer(lane, command.apply(reply), reply));
        }
        if (lanes.length == 1)
        {
            return replies.getFirst().thenApply(only -> combine.apply(List.of(only)));
        }
        return CompletableFuture.allOf(replies.toArray(new CompletableFuture<?>[0]))
            .thenApply(done -> combine.apply(replies.stream().map(CompletableFuture::join).toList()));
    }

    private static <T> CompletableFuture<T> offer(
        final LaneHandle lane, final DataplaneCommand command, final CompletableFuture<T> reply)
    {
        if (!lane.commands().offer(command))
        {
            reply.completeExceptionally(new IllegalStateException("dataplane command queue full"));
        }
        return reply;
    }
}
