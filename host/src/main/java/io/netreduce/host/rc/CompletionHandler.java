package io.netreduce.host.rc;

/**
 * Receives completions from {@link CompletionQueue#poll(CompletionHandler, int)}.
 */
@FunctionalInterface
public interface CompletionHandler
{
    /**
     * @param completion a view valid only during the call.
     */
    void onCompletion(Completion completion);
}
