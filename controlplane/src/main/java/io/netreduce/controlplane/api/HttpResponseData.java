package io.netreduce.controlplane.api;

import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * An HTTP response from a handler.
 *
 * @param status      the status code.
 * @param contentType the Content-Type.
 * @param body        the body bytes.
 * @param headers     extra headers, e.g. {@code Allow}.
 */
public record HttpResponseData(int status, String contentType, byte[] body, Map<String, String> headers)
{
    /** JSON content type. */
    public static final String JSON = "application/json; charset=utf-8";

    /**
     * @param status the status code.
     * @param json   the JSON text.
     * @return a JSON response.
     */
    public static HttpResponseData json(final int status, final String json)
    {
        return new HttpResponseData(status, JSON, json.getBytes(StandardCharsets.UTF_8), Map.of());
    }
}
