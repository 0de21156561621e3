package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.dataplane.switchml.SwitchMlJobView;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A request from the control thread to the dataplane thread, applied between two receive batches. Each
 * carries the future the dataplane completes with its reply (or exceptionally, with a message saying why it
 * refused). Commands are created by the control thread; the dataplane only reads them.
 */
public sealed interface DataplaneCommand
{
    /**
     * @return the future the dataplane completes with its reply, or exceptionally when it refuses the command or
     *         closes before applying it.
     */
    CompletableFuture<?> reply();

    /**
     * Install a ring: allocate its aggregator array, register its edges. Refused if the ring id is in use,
     * the configuration is invalid or its memory does not fit the budget.
     */
    record InstallRing(RingDefinition config, CompletableFuture<RingInstalled> reply) implements DataplaneCommand
    {
    }

    /**
     * Remove a ring: its CLT entries, edges and memory go; its traffic then passes through.
     */
    record RemoveRing(int ringId, CompletableFuture<RingRemoved> reply) implements DataplaneCommand
    {
    }

    /**
     * Dump the CLT.
     */
    record SnapshotConnections(CompletableFuture<List<ConnectionEntry>> reply) implements DataplaneCommand
    {
    }

    /**
     * Report a ring's aggregator occupancy with up to {@code limit} of its oldest incomplete aggregators.
     */
    record SnapshotRing(int ringId, int limit, CompletableFuture<AggregatorUsage> reply) implements DataplaneCommand
    {
    }

    /**
     * List installed rings.
     */
    record ListRings(CompletableFuture<List<RingInstalled>> reply) implements DataplaneCommand
    {
    }

    /**
     * Install a capture tap: from the next batch on, the frames it selects are copied into its ring. Refused if
     * its port does not exist, the port already has a tap, drops already have a tap, or its id is in use.
     */
    record StartCapture(CaptureTap tap, CompletableFuture<CaptureTap> reply) implements DataplaneCommand
    {
    }

    /**
     * Remove a capture tap; once the reply completes the dataplane no longer writes to its ring.
     */
    record StopCapture(int captureId, CompletableFuture<CaptureTap> reply) implements DataplaneCommand
    {
    }

    /**
     * Install a SwitchML job with a fresh slot pool. Refused if its number is in use or its pool does not fit the
     * memory budget.
     */
    record InstallSwitchMlJob(SwitchMlJobDefinition definition, CompletableFuture<SwitchMlJobView> reply)
        implements DataplaneCommand
    {
    }

    /**
     * Forget every slot state of a SwitchML job (the controller's reset when the job's rank 0 opens its session).
     */
    record ResetSwitchMlJob(int job, CompletableFuture<SwitchMlJobView> reply) implements DataplaneCommand
    {
    }

    /**
     * Remove a SwitchML job: its pool's memory goes; its packets then pass through.
     */
    record RemoveSwitchMlJob(int job, CompletableFuture<SwitchMlJobView> reply) implements DataplaneCommand
    {
    }

    /**
     * List the installed SwitchML jobs with their figures.
     */
    record ListSwitchMlJobs(CompletableFuture<List<SwitchMlJobView>> reply) implements DataplaneCommand
    {
    }
}
