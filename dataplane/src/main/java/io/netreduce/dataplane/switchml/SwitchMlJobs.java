package io.netreduce.dataplane.switchml;

import io.netreduce.dataplane.aggregator.MemoryBudget;

import java.util.ArrayList;
import java.util.List;

/**
 * The lane's SwitchML job table, by job number: installed, reset and removed by control commands, read by
 * {@link SwitchMlProtocol} in place. Each job's pool draws on the lane's aggregator {@link MemoryBudget}, the same
 * one NetReduce's rings use. Owned by the dataplane thread.
 */
public final class SwitchMlJobs implements AutoCloseable
{
    public static final int MAX_JOBS = 256;

    private final SwitchMlJob[] jobs = new SwitchMlJob[MAX_JOBS];
    private final MemoryBudget memory;

    public SwitchMlJobs(final MemoryBudget memory)
    {
        this.memory = memory;
    }

    SwitchMlJob job(final int job)
    {
        return jobs[job & 0xFF];
    }

    /**
     * Install a job with a fresh pool (no slot state of an earlier job with the same number survives).
     *
     * @throws IllegalArgumentException if the number is taken or the pool does not fit the memory budget.
     */
    public SwitchMlJobView install(final SwitchMlJobDefinition definition)
    {
        if (jobs[definition.job()] != null)
        {
            throw new IllegalArgumentException("SwitchML job " + definition.job() + " is already installed; remove it " +
                "first");
        }
        memory.take(definition.memoryBytes(), "SwitchML job " + definition.job());
        final SwitchMlJob job = new SwitchMlJob(definition);
        jobs[definition.job()] = job;
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
        jobs[jobNumber] = null;
        memory.release(job.definition().memoryBytes());
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
                memory.release(jobs[i].definition().memoryBytes());
                jobs[i] = null;
            }
        }
    }
}
