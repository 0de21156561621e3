package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The sidecar's request reader and reply writer (streaming, no ObjectMapper) against ObjectMapper's: the same trees
 * in, the same lines out, and malformed requests refused as before.
 */
class RequestsTest
{
    private static final ObjectMapper MAPPER = new ObjectMapper();

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
        "{\"op\":\"open\",\"rank\":1,\"world\":4,\"shm\":\"/dev/shm/netreduce-abc\",\"shmBytes\":67108864," +
            "\"ringId\":1,\"elementType\":\"fp32\",\"window\":16,\"msgLen\":16,\"payloadSize\":4096," +
            "\"inetTag\":\"NRED\",\"resultTag\":\"NRES\",\"timeoutMs\":30000,\"ecnWindow\":true,\"ecnGain\":0.0625," +
            "\"doorbell\":67108864}",
        "{\"op\": \"connect\", \"successor\": \"a b\\tc\\u00e9\\\"\", \"predecessor\": null}",
        "{\"op\":\"allreduce\",\"elements\":9223372036854775807,\"big\":92233720368547758070,\"neg\":-5}",
        "{\"op\":\"x\",\"f\":1.5e3,\"g\":-0.0,\"h\":1E-7,\"n\":{\"deep\":[1,\"two\",[3.5,false],{}]},\"e\":[]}",
        "{\"op\":\"first\",\"op\":\"last\"}",
        "{\"op\":\"stats\"}  trailing words",
    })
    void shouldReadARequestIntoTheTreeObjectMapperReads(final String line) throws Exception
    {
        final JsonNode mine = Requests.parse(line);

        final JsonNode theirs = MAPPER.readTree(line);
        assertThat(mine).isEqualTo(theirs);
        // node types too (equals compares numbers by value and type)
        assertThat(mine.toString()).isEqualTo(theirs.toString());
    }

    @ParameterizedTest(name = "[{index}] \"{0}\"")
    @ValueSource(strings = { "", "   ", "[1,2]", "\"open\"", "{\"rank\":1}", "{\"op\":3}", "null" })
    void shouldRefuseWhatIsNoObjectWithAStringOp(final String line)
    {
        assertThatThrownBy(() -> Requests.parse(line)).isInstanceOf(IllegalArgumentException.class)
            .hasMessage("request must be a JSON object with a string \"op\"");
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = { "{\"op\":", "{op:\"open\"}", "{\"op\":\"open\",}", "not json", "{\"op\":\"a\" \"b\"}" })
    void shouldRefuseWhatIsNotJsonSayingSo(final String line)
    {
        assertThatThrownBy(() -> Requests.parse(line)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageStartingWith("request is not JSON: ");
    }

    @Test
    void shouldRefuseALineThatWasTooLong()
    {
        assertThatThrownBy(() -> Requests.parse(Requests.TOO_LONG)).isInstanceOf(IllegalArgumentException.class)
            .hasMessage("request longer than " + ControlChannel.MAX_LINE + " bytes");
    }

    @Test
    void shouldWriteARepliesLineAsObjectMapperWould() throws Exception
    {
        final ObjectNode reply = Requests.ok().put("messages", 256).put("messageBytes", 65536).put("input", 0)
            .put("bytesPosted", 1L << 40).put("alpha", 0.0625).put("ecnWindow", false)
            .put("send", "qpn=0x11 psn=0x1234 \"quoted\" \u00e9\n").putNull("none");
        reply.putArray("list").add(1).add("x");
        reply.putObject("nested").put("k", 2.5f);

        assertThat(Requests.text(reply)).isEqualTo(MAPPER.writeValueAsString(reply)).doesNotContain("\n");
        assertThat(Requests.error("open: \"x\" must be an integer"))
            .isEqualTo("{\"ok\":false,\"error\":\"open: \\\"x\\\" must be an integer\"}");
    }
}
