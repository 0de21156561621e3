package io.netreduce.dataplane.switchml;

import io.netreduce.dataplane.aggregator.MemoryBudget;
import org.agrona.collections.Int2IntHashMap;

import java.util.ArrayList;
import java.util.List;

/**
 * The lane's SwitchML job table: installed, reset and removed by control commands under the job's id, read by
 * {@link SwitchMlProtocol} in place, which finds a packet's job and worker by the packet's source address (as the P4
 * program's {@code receive_udp} table does: the header's job number is the client's own per-call id, echoed in
 * results, not a key). A worker address belongs to at most one job. Each job's pool draws on the lane's aggregator
 * {@link MemoryBudget}, the same one NetReduce's rings use; so do the appliance addresses results leave from.
 * Owned by the dataplane thread.
 */
public final class SwitchMlJobs implements AutoCloseable
{
    public static final int MAX_JOBS = 256;

    private static final int NONE = -1;
    private static final int WORKER_BITS = 8;

    private final SwitchMlJob[] jobs = new SwitchMlJob[MAX_JOBS];
    /** Worker IPv4 address to {@code job << 8 | worker}. */
    private final Int2IntHashMap byWorkerIp = new Int2IntHashMap(NONE);
    /** Appliance IPv4 address to the number of jobs answering from it. */
    private final Int2IntHashMap applianceIps = new Int2IntHashMap(0);
    private final MemoryBudget memory;

    public SwitchMlJobs(final MemoryBudget memory)
    {
        this.memory = memory;
    }

    /**
     * @return {@code job << 8 | worker} of the worker with this source address, or a negative value if none.
     */
    int workerOf(final int srcIp)
    {
        return byWorkerIp.get(srcIp);
    }

    static int jobOf(final int jobAndWorker)
    {
        return jobAndWorker >>> WORKER_BITS;
    }

    static int workerIndexOf(final int jobAndWorker)
    {
        return jobAndWorker & ((1 << WORKER_BITS) - 1);
    }

    SwitchMlJob job(final int job)
    {
        return jobs[job & 0xFF];
    }

    /**
     * @return whether some job's results leave from this address (a SwitchML packet to it is meant for us).
     */
    boolean isApplianceAddress(final int ip)
    {
        return applianceIps.get(ip) > 0;
    }

    /**
     * Install a job with a fresh pool (no slot state of an earlier job with the same number survives).
     *
     * @throws IllegalArgumentException if the id is taken, a worker's address is another job's, or the pool does
     *                                  not fit the memory budget.
     */
    public SwitchMlJobView install(final SwitchMlJobDefinition definition)
    {
        if (jobs[definition.job()] != null)
        {
            throw new IllegalArgumentException("SwitchML job " + definition.job() + " is already installed; remove it " +
                "first");
        }
        for (final SwitchMlJobDefinition.Worker worker : definition.workers())
        {
            final int other = byWorkerIp.get(worker.ip());
            if (other != NONE)
            {
                throw new IllegalArgumentException("SwitchML job " + definition.job() + ": worker " +
                    SwitchMlJobDefinition.ipString(worker.ip()) + " is already in job " + jobOf(other) +
                    " (the appliance tells jobs apart by their workers' addresses)");
            }
        }
        memory.take(definition.memoryBytes(), "SwitchML job " + definition.job());
        final SwitchMlJob job = new SwitchMlJob(definition);
        jobs[definition.job()] = job;
        for (int w = 0; w < definition.workers().size(); w++)
        {
            byWorkerIp.put(definition.workers().get(w).ip(), definition.job() << WORKER_BITS | w);
        }
        applianceIps.put(definition.applianceIp(), applianceIps.get(definition.applianceIp()) + 1);
        return view(job);
    }

    /**
     * Forget every slot's state of the job: the controller's reset when a job's rank 0 (re)opens its session, so
     * that nothing of the previous job with this number reaches the next.
     *
     * @throws IllegalArgumentException if no such job is installed.
     */
    public SwitchMlJobView reset(final int jobNumber)
    {
        final SwitchMlJob job = require(jobNumber);
        job.reset();
        return view(job);
    }

    /**
     * @throws IllegalArgumentException if no such job is installed.
     */
    public SwitchMlJobView remove(final int jobNumber)
    {
        final SwitchMlJob job = require(jobNumber);
        forget(job);
        return view(job);
    }

    public List<SwitchMlJobView> list()
    {
        final List<SwitchMlJobView> views = new ArrayList<>();
        for (final SwitchMlJob job : jobs)
        {
            if (job != null)
            {
                views.add(view(job));
            }
        }
        return views;
    }

    private SwitchMlJob require(final int jobNumber)
    {
        final SwitchMlJob job = jobNumber >= 0 && jobNumber < MAX_JOBS ? jobs[jobNumber] : null;
        if (job == null)
        {
            throw new IllegalArgumentException("SwitchML job " + jobNumber + " is not installed");
        }
        return job;
    }

    private static SwitchMlJobView view(final SwitchMlJob job)
    {
        final SwitchMlJobDefinition definition = job.definition();
        return new SwitchMlJobView(definition.job(), job.workers(), job.elements(), job.poolSize(),
            definition.memoryBytes(), job.setsInFlight(), job.packets, job.completions, job.resultsSent,
            job.resultsResent, job.pendingDrops, job.notMemberDrops, job.wrongSizeDrops, job.badPoolIndexDrops);
    }

    @Override
    public void close()
    {
        for (int i = 0; i < MAX_JOBS; i++)
        {
            if (jobs[i] != null)
            {
                forget(jobs[i]);
            }
        }
    }

    private void forget(final SwitchMlJob job)
    {
        final SwitchMlJobDefinition definition = job.definition();
        jobs[definition.job()] = null;
        for (final SwitchMlJobDefinition.Worker worker : definition.workers())
        {
            byWorkerIp.remove(worker.ip());
        }
        final int users = applianceIps.get(definition.applianceIp()) - 1;
        if (users > 0)
        {
            applianceIps.put(definition.applianceIp(), users);
        }
        else
        {
            applianceIps.remove(definition.applianceIp());
        }
        memory.release(definition.memoryBytes());
    }
}
