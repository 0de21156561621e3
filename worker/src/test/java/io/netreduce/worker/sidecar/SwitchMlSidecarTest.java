package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PortPoller;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.OutputStream;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static java.nio.ByteOrder.BIG_ENDIAN;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The SwitchML sidecar's requests against a real Unix socket and a sidecar loop on a memory port, with a stand-in
 * switch: it answers every packet with the packet's elements doubled (the sum of two workers holding the same tensor,
 * which is what a job of W = 2 returns to such workers) and its exponent (their maximum). So a call through the
 * sidecar must leave 2x in the shared memory: exactly for int32, within the block fixed point's bound for fp32, and
 * only in the call's elements.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SwitchMlSidecarTest
{
    private static final int ELEMENTS_PER_PACKET = 64;
    private static final int SHM_BYTES = 1 << 16;
    private static final int CAPACITY = SHM_BYTES / 4;
    private static final long WORKER_MAC = 0x02_00_00_00_00_01L;
    private static final int WORKER_IP = 0x0A_00_00_01;
    private static final SwitchMlSidecar.Switch SWITCH = new SwitchMlSidecar.Switch(0x02_00_00_00_00_FEL, 0x0A_00_00_FE);

    @TempDir
    Path dir;

    private final ExecutorService threads = Executors.newCachedThreadPool();
    private final AtomicBoolean switchAnswers = new AtomicBoolean(true);
    private final AtomicBoolean stopping = new AtomicBoolean();
    private final AtomicInteger registrations = new AtomicInteger();
    private volatile String refusal;
    private MemoryPort port;
    private Doorbell doorbell;
    private PortPoller poller;
    private ControlChannel control;
    private CompletableFuture<Void> served;
    private CompletableFuture<Void> switchLoop;
    private SocketChannel client;
    private BufferedReader in;
    private OutputStream out;
    private Path shm;
    private MappedByteBuffer memory;
    private FileChannel memoryFile;

    @BeforeEach
    void start() throws Exception
    {
        port = new MemoryPort("switchml-sidecar");
        doorbell = new Doorbell();
        poller = new PortPoller(List.of(port), doorbell);
        final Path socket = dir.resolve("sidecar.sock");
        control = new ControlChannel(socket, doorbell);
        final SidecarLines.Connection connection = SidecarLines.connect(control, socket, threads);
        client = connection.client();
        in = connection.in();
        out = connection.out();
        final SwitchMlSidecar.Registrar registrar = (rank, world, mac, ip, perPacket) ->
        {
            registrations.incrementAndGet();
            assertThat(mac).isEqualTo(WORKER_MAC);
            assertThat(ip).isEqualTo(WORKER_IP);
            assertThat(perPacket).isEqualTo(ELEMENTS_PER_PACKET);
            if (refusal != null)
            {
                throw new IllegalStateException(refusal);
            }
            return SWITCH;
        };
        final SwitchMlSidecar sidecar = new SwitchMlSidecar(port, poller, WORKER_MAC, WORKER_IP,
            new SwitchMlSidecar.Settings(ELEMENTS_PER_PACKET, 16, 2_000_000, 40_000), registrar, control);
        served = CompletableFuture.runAsync(() ->
        {
            try
            {
                sidecar.run();
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        }, threads);
        switchLoop = CompletableFuture.runAsync(this::answer, threads);
        shm = dir.resolve("shm");
        Files.write(shm, new byte[SHM_BYTES]);
        memoryFile = FileChannel.open(shm, StandardOpenOption.READ, StandardOpenOption.WRITE);
        memory = memoryFile.map(FileChannel.MapMode.READ_WRITE, 0, SHM_BYTES);
        memory.order(ByteOrder.nativeOrder());
    }

    @AfterEach
    void stop() throws Exception
    {
        client.close();
        served.get(10, TimeUnit.SECONDS);
        stopping.set(true);
        switchLoop.get(10, TimeUnit.SECONDS);
        control.close();
        poller.close();
        doorbell.close();
        memoryFile.close();
        threads.shutdownNow();
    }

    /**
     * The stand-in switch: every packet comes back from the switch's addresses and port with its elements doubled.
     */
    private void answer()
    {
        while (!stopping.get())
        {
            final List<byte[]> sent = port.drainSent();
            for (final byte[] frame : sent)
            {
                if (!switchAnswers.get())
                {
                    continue;
                }
                final UnsafeBuffer buffer = new UnsafeBuffer(frame);
                swap(buffer, 0, 6, 6);      // MACs
                swap(buffer, 26, 30, 4);    // IPv4 addresses (the header checksum stays right)
                swap(buffer, 34, 36, 2);    // UDP ports
                for (int i = 0; i < ELEMENTS_PER_PACKET; i++)
                {
                    final int at = SwitchMlPacketWriter.elementsOffset(0) + i * Integer.BYTES;
                    buffer.putInt(at, 2 * buffer.getInt(at, BIG_ENDIAN), BIG_ENDIAN);
                }
                port.inject(frame);
            }
            if (sent.isEmpty())
            {
                Thread.onSpinWait();
            }
        }
    }

    private static void swap(final UnsafeBuffer buffer, final int a, final int b, final int length)
    {
        for (int i = 0; i < length; i++)
        {
            final byte x = buffer.getByte(a + i);
            buffer.putByte(a + i, buffer.getByte(b + i));
            buffer.putByte(b + i, x);
        }
    }

    private JsonNode ask(final String line) throws Exception
    {
        return SidecarLines.ask(out, in, threads, line, 20);
    }

    private String open(final String type, final String extra)
    {
        return "{\"op\":\"open\",\"rank\":1,\"world\":2,\"elementType\":\"" + type + "\",\"timeoutMs\":300," +
            "\"shm\":\"" + shm + "\",\"shmBytes\":" + SHM_BYTES + extra + "}";
    }

    private static void assertOk(final JsonNode reply)
    {
        assertThat(reply.path("ok").asBoolean()).as(reply.toString()).isTrue();
    }

    private static void assertError(final JsonNode reply, final String text)
    {
        assertThat(reply.path("ok").asBoolean(true)).as(reply.toString()).isFalse();
        assertThat(reply.path("error").asText()).contains(text);
    }

    @Test
    void shouldSumInt32ValuesInPlaceExactlyAndLeaveTheRestOfTheMemoryAlone() throws Exception
    {
        final JsonNode opened = ask(open("int32", ""));
        assertOk(opened);
        assertThat(opened.path("ip").asText()).isEqualTo("10.0.0.1");
        assertThat(opened.path("mac").asText()).isEqualTo("02:00:00:00:00:01");
        assertThat(opened.path("switchIp").asText()).isEqualTo("10.0.0.254");
        assertThat(opened.path("switchMac").asText()).isEqualTo("02:00:00:00:00:fe");
        assertThat(opened.path("elementType").asText()).isEqualTo("int32");
        assertThat(opened.path("elementsPerPacket").asInt()).isEqualTo(ELEMENTS_PER_PACKET);
        assertThat(opened.path("udpPort").asInt()).isEqualTo(40_001);
        assertThat(opened.path("elements").asInt()).isEqualTo(CAPACITY);
        assertOk(ask("{\"op\":\"connect\"}"));
        final SplittableRandom random = new SplittableRandom(7);
        // not a multiple of the packet's elements; then the whole memory; then one element
        for (final int n : new int[] { 10 * ELEMENTS_PER_PACKET + 3, CAPACITY, 1 })
        {
            final int[] values = new int[CAPACITY];
            for (int i = 0; i < CAPACITY; i++)
            {
                values[i] = random.nextInt();
                memory.putInt(i * 4, values[i]);
            }
            final JsonNode reply = ask("{\"op\":\"allreduce\",\"elements\":" + n + "}");
            assertOk(reply);
            assertThat(reply.path("us").asLong(-1)).isNotNegative();
            for (int i = 0; i < CAPACITY; i++)
            {
                assertThat(memory.getInt(i * 4)).as("element " + i + " of " + n).isEqualTo(i < n ? 2 * values[i] :
                    values[i]);
            }
        }
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("calls").asInt()).isEqualTo(3);
        assertThat(stats.path("failedCalls").asInt(-1)).isZero();
        assertThat(stats.path("framesSent").asLong()).isGreaterThanOrEqualTo(11 + CAPACITY / ELEMENTS_PER_PACKET + 1);
        assertThat(registrations.get()).isEqualTo(1);
        assertOk(ask("{\"op\":\"close\"}"));
    }

    @Test
    void shouldSumFp32ValuesWithinTheBlockFixedPointsBound() throws Exception
    {
        assertOk(ask(open("fp32", "")));
        final SplittableRandom random = new SplittableRandom(8);
        final int n = 37 * ELEMENTS_PER_PACKET + 5;
        final float[] values = new float[n];
        for (int i = 0; i < n; i++)
        {
            // blocks of very different magnitudes, some zeros
            final int block = i / ELEMENTS_PER_PACKET;
            values[i] = block % 5 == 4 ? 0f : (float)((random.nextDouble() - 0.5) * Math.scalb(1.0, block - 20));
            memory.putFloat(i * 4, values[i]);
        }
        assertOk(ask("{\"op\":\"allreduce\",\"elements\":" + n + "}"));
        final ExponentQuantizer quantizer = new ExponentQuantizer(2);
        for (int i = 0; i < n; i++)
        {
            final int from = i / ELEMENTS_PER_PACKET * ELEMENTS_PER_PACKET;
            final int e = ExponentQuantizer.exponent(values, from, Math.min(ELEMENTS_PER_PACKET, n - from));
            final double sum = 2.0 * values[i];
            assertThat(Math.abs(memory.getFloat(i * 4) - sum)).as("element " + i)
                .isLessThanOrEqualTo(quantizer.errorBound(e, sum));
        }
        memory.putFloat(5 * 4, Float.NaN);
        assertError(ask("{\"op\":\"allreduce\",\"elements\":10}"), "element 5 is NaN");
        assertThat(memory.getFloat(5 * 4)).isNaN();
        assertOk(ask("{\"op\":\"close\"}"));
    }

    @Test
    void shouldRefuseWhatSwitchMlDoesNotDoNamingIt() throws Exception
    {
        assertError(ask("{\"op\":\"allreduce\",\"elements\":1}"), "allreduce before open");
        assertError(ask("{\"op\":\"connect\"}"), "connect before open");
        assertError(ask(open("fp16", "")), "fp32 (block fixed point) or int32 (exact) with SwitchML, not 'fp16'");
        assertError(ask(open("int32", ",\"world\":1,\"rank\":0")), "2 <= world <= 64");
        assertError(ask(open("int32", ",\"world\":65")), "2 <= world <= 64");
        assertError(ask(open("int32", ",\"shmBytes\":0")), "shmBytes must be");
        assertError(ask(open("int32", ",\"timeoutMs\":0")), "timeoutMs must be positive");
        assertThat(registrations.get()).isZero();
        refusal = "the SwitchML controller at 10.0.0.253:50099 refused the session: not allowed";
        assertError(ask(open("int32", "")), "refused the session: not allowed");
        assertOk(ask("{\"op\":\"close\"}"));
    }

    @Test
    void shouldRefuseCallsThatDoNotFitAndASecondOpen() throws Exception
    {
        assertOk(ask(open("int32", "")));
        assertError(ask(open("int32", "")), "already serves a SwitchML session");
        assertError(ask("{\"op\":\"allreduce\",\"elements\":" + (CAPACITY + 1) + "}"),
            "do not fit the shared memory: it holds " + CAPACITY);
        assertError(ask("{\"op\":\"allreduce\",\"elements\":0}"), "do not fit");
        assertError(ask("{\"op\":\"allreduce\",\"elements\":4,\"offset\":8}"), "offset 0");
        assertOk(ask("{\"op\":\"allreduce\",\"elements\":4}"));
        assertOk(ask("{\"op\":\"close\"}"));
    }

    @Test
    void shouldFailACallWithoutResultsAfterTheTimeoutAndTakeNoOther() throws Exception
    {
        assertOk(ask(open("int32", "")));
        switchAnswers.set(false);
        final long start = System.nanoTime();
        assertError(ask("{\"op\":\"allreduce\",\"elements\":1000}"), "no result for 300 ms; 0 of 16 packets summed");
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isBetween(250L, 10_000L);
        switchAnswers.set(true);
        assertError(ask("{\"op\":\"allreduce\",\"elements\":1000}"), "no call after a failed one");
        final JsonNode stats = ask("{\"op\":\"stats\"}");
        assertThat(stats.path("failedCalls").asInt()).isEqualTo(1);
        assertThat(stats.path("retransmittedPackets").asLong()).isPositive();
        assertOk(ask("{\"op\":\"close\"}"));
    }
}
