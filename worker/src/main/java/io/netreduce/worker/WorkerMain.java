package io.netreduce.worker;

/**
 * The main class of {@code netreduce-worker.jar}: {@link WorkerCommand}'s command line, with the sidecar's
 * ({@code worker serve}) quick way in first.
 * <p>
 * A class of its own so that a sidecar's JVM does not load picocli's command line: WorkerCommand names picocli's
 * types, and linking it (as the JVM does for a main class, from the AOT cache too) loads {@code picocli.CommandLine}
 * from the jar, a large class the cache cannot hold (picocli's class files are too old a version).
 */
public final class WorkerMain
{
    private WorkerMain()
    {
    }

    public static void main(final String[] args)
    {
        final ServeCommand serve = ServeCommandLine.parse(args);
        System.exit(serve != null ? ServeCommandLine.run(serve) : WorkerCommand.execute(args));
    }
}
