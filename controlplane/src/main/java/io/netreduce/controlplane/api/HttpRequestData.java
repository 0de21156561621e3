package io.netreduce.controlplane.api;

import java.util.List;
import java.util.Map;

/**
 * An HTTP request as the handlers see it: no Netty types, so handlers are plain functions and easy to test.
 *
 * @param method      the method, upper case.
 * @param path        the decoded path without the query.
 * @param query       the query parameters.
 * @param contentType the Content-Type header or null.
 * @param body        the body as UTF-8 text (empty if none).
 */
public record HttpRequestData(
    String method, String path, Map<String, List<String>> query, String contentType, String body)
{
}
