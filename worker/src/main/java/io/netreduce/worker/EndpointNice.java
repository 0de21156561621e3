package io.netreduce.worker;

import io.netreduce.protocol.port.ThreadNice;

import java.io.PrintStream;

/**
 * The nice value of the thread that drives a worker's RC endpoint ({@code --endpoint-nice}), shared by the commands
 * that run one.
 */
final class EndpointNice
{
    /**
     * -10: the endpoint thread's weight about nine times a trainer thread's, so a frame's wake-up gets it a core at
     * once. It blocks in poll(2) whenever its frames are done, so it still takes only what they need (83-98 ms of the
     * rank's CPU in a 600 ms call). On the bed (64 MiB, W = 4, 1 Gbit/s, a busy process beside each worker) with the
     * appliance's lanes at -10 too (dataplane.laneNice), calls took 606 and 601 ms against 859 and 822 with both at 0;
     * the endpoints alone at -10 took 855 and 943 (docs/performance.md, "Packet threads ahead of the trainer").
     * Unshaped and at W = 8 it changed nothing.
     */
    static final int DEFAULT = -10;

    static final String DESCRIPTION = "Nice value of the thread that drives the RC endpoint, -20..19 (default " +
        "${DEFAULT-VALUE}): lower than the trainer's, so a frame's wake-up gets the thread a core at once on a busy " +
        "host. Below the current value it needs CAP_SYS_NICE or RLIMIT_NICE (ulimit -e); when refused, the thread " +
        "keeps its value and a warning says so.";

    private EndpointNice()
    {
    }

    /**
     * Apply {@code nice} to the calling thread, or warn on {@code err} that it keeps its value.
     *
     * @return whether the thread now runs at {@code nice}.
     * @throws IllegalArgumentException for a value out of range.
     */
    static boolean apply(final int nice, final String command, final PrintStream err)
    {
        final String refusal = ThreadNice.applyToCurrentThread(nice);
        if (refusal != null)
        {
            err.println(command + ": warning: the endpoint thread keeps its nice value, so calls slow down when the " +
                "host's cores are busy: " + refusal);
        }
        return refusal == null;
    }
}
