package io.netreduce.controlplane.api;

/**
 * Answers one HTTP request. Runs on the endpoint's handler thread, never on a network I/O thread, so it may
 * take locks or read files.
 */
@FunctionalInterface
public interface RequestHandler
{
    /**
     * @param request the request.
     * @return the response; exceptions escaping become a 500 with the message.
     */
    HttpResponseData handle(HttpRequestData request);
}
