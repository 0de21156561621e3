package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;

/**
 * What every sidecar does whatever it aggregates through: one thread that drives its port, takes the trainer's
 * requests from the {@link ControlChannel} between calls (one call at a time; requests queue in order), dispatches
 * them ({@code open}, {@code connect}, {@code allreduce}, {@code stats}, {@code close}: docs/python.md), answers each,
 * and maps the shared memory file the trainer names in {@code open} ({@link #mapShared}). What a request does is the protocol's:
 * {@link Sidecar} (a NetReduce ring over the software RC endpoint), {@link SwitchMlSidecar} (a SwitchML worker).
 * <p>
 * Between calls the loop keeps {@link #doWork driving the port}; it blocks in its idle strategy, which wakes on a frame
 * or the doorbell the control channel rings, so an idle sidecar takes no CPU.
 */
abstract class SidecarLoop
{
    /**
     * A call failed: answered with its message, counted in {@code failedCalls}.
     */
    static final class CallFailedException extends Exception
    {
        private static final long serialVersionUID = 1L;

        CallFailedException(final String message)
        {
            super(message);
        }
    }

    private final ControlChannel control;
    /**
     * The shared memory's mappings, unmapped when the loop ends: a {@code worker agent} serves session after session
     * in one process, and a MappedByteBuffer stays mapped until the collector finds it (a 64 MiB area a session).
     */
    private final Arena mappings = Arena.ofShared();
    private FileChannel sharedFile;
    private CallPage callPage;
    private long callStartNs;
    private boolean inCall;
    /** The call in progress was answered (its sums are in) and waits only for its input area's release. */
    private boolean answered;
    private boolean callByDoorbell;
    /** The trainer asked at open to be answered at the sums and told of the input area's release apart. */
    private boolean answerAtSums;
    private boolean closing;
    private long calls;
    private long failedCalls;
    private long callsFailedAfterAnswer;

    SidecarLoop(final ControlChannel control)
    {
        this.control = control;
    }

    /**
     * @return how the loop waits after a duty cycle (asked once, when the loop starts).
     */
    abstract IdleStrategy idleStrategy();

    /**
     * One turn of the port between and during calls (frames in, timers).
     *
     * @return the work done.
     */
    abstract int doWork();

    /**
     * {@code open}: check the request, {@link #mapShared map} its shared memory and set up.
     *
     * @param reply {@code {"ok":true}}, to add to.
     * @return the reply.
     * @throws IOException if the shared memory cannot be mapped.
     */
    abstract ObjectNode open(JsonNode request, ObjectNode reply) throws IOException;

    /**
     * {@code connect}.
     */
    abstract void connect(JsonNode request);

    /**
     * Check what a JSON {@code allreduce} says besides its {@code elements} (a doorbell call carries nothing else).
     */
    void checkCallRequest(final JsonNode request)
    {
    }

    /**
     * {@code allreduce} of the first {@code elements} values (from a JSON request or the call doorbell): check it and
     * start the call (its first packets may go out).
     *
     * @throws CallFailedException if the call failed as it began (what had arrived before it says the ring is not
     *                             aggregated, say): answered like a failure while it runs, and the loop keeps driving
     *                             the endpoint, so the call's own first messages still go out and the neighbours fail
     *                             for the same reason rather than by timeout.
     */
    abstract void beginCall(long elements) throws CallFailedException;

    /**
     * Work for a turn with no request and no call (a warm-up): the loop blocks only when this returns 0, and takes
     * every request before it, so keep each turn's share short.
     *
     * @return the work done; 0 (the default) when there is none.
     */
    int idleWork()
    {
        return 0;
    }

    /**
     * Drive the call begun last, after {@link #doWork}.
     *
     * @return the work done.
     * @throws CallFailedException if the call failed (the sidecar takes no other).
     */
    abstract int pollCall() throws CallFailedException;

    /**
     * @return whether the call begun last is done (its sums are where the trainer reads them).
     */
    abstract boolean callDone();

    /**
     * @return whether nothing will read the input area for the call begun last any more, not even a retransmission
     * (asked once {@link #callDone()}): until then the trainer must not refill it. Here: at once.
     */
    boolean inputReleased()
    {
        return true;
    }

    /**
     * {@code stats}: the protocol's counters, besides {@code calls} and {@code failedCalls}.
     */
    abstract void stats(ObjectNode reply);

    /**
     * @return whether a call is in progress.
     */
    final boolean inCall()
    {
        return inCall;
    }

    /**
     * Serve until the trainer sends {@code close} or goes away.
     */
    final void run() throws IOException
    {
        final IdleStrategy idle = idleStrategy();
        try
        {
            while (!closing)
            {
                int work = doWork();
                if (inCall)
                {
                    work += serveCall();
                }
                else
                {
                    final String line = control.poll();
                    if (line != null)
                    {
                        handle(line);
                        work++;
                    }
                    else if (callPage != null && beginDoorbellCall())
                    {
                        work++;
                    }
                    else if (control.isClosed())
                    {
                        break;
                    }
                    else
                    {
                        work += idleWork();
                    }
                }
                idle.idle(work);
            }
        }
        finally
        {
            if (sharedFile != null)
            {
                sharedFile.close();
            }
            mappings.close();
        }
    }

    /**
     * Drive the call in progress. A doorbell call whose trainer asked for it is answered as soon as its sums are in,
     * and its input area released apart once nothing will read it again; every other call is answered when both
     * are done. Until the release the loop takes no other request.
     */
    private int serveCall() throws IOException
    {
        try
        {
            final int work = pollCall();
            if (answered)
            {
                if (inputReleased())
                {
                    callPage.release();
                    endCall();
                }
            }
            else if (callDone())
            {
                final boolean released = inputReleased();
                if (released || (callByDoorbell && answerAtSums))
                {
                    calls++;
                    final long micros = TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - callStartNs);
                    if (callByDoorbell)
                    {
                        callPage.answer(CallPage.STATUS_OK, micros, released);
                    }
                    else
                    {
                        control.reply(Requests.text(Requests.ok().put("us", micros)));
                    }
                    if (released)
                    {
                        endCall();
                    }
                    else
                    {
                        answered = true; // its input area is released on a later turn
                    }
                }
            }
            return work;
        }
        catch (final CallFailedException ex)
        {
            if (answered)
            {
                // The sums were in and answered; what failed is the ring, while this call's own writes waited for
                // their ACKs. Nothing resends from the input area now, and the next call fails with the reason.
                callsFailedAfterAnswer++;
                callPage.release();
                endCall();
                return 1;
            }
            endCall();
            callFailed(ex.getMessage());
            return 1;
        }
    }

    private void endCall()
    {
        inCall = false;
        answered = false;
    }

    /**
     * Take a call the trainer posted on the call page, if any, and begin it.
     *
     * @return whether there was one.
     */
    private boolean beginDoorbellCall() throws IOException
    {
        final long elements = callPage.takeRequest();
        if (elements < 0)
        {
            return false;
        }
        callByDoorbell = true;
        try
        {
            callStartNs = System.nanoTime();
            beginCall(elements);
            inCall = true;
        }
        catch (final IllegalArgumentException | IllegalStateException ex)
        {
            failCall(ex.getMessage());
        }
        catch (final CallFailedException ex)
        {
            callFailed(ex.getMessage());
        }
        return true;
    }

    /**
     * A call that began and failed: counted in {@code failedCalls} and answered with the reason ({@link #failCall}).
     */
    private void callFailed(final String message) throws IOException
    {
        failedCalls++;
        failCall(message);
    }

    /**
     * Answer the current call with an error: a JSON error line either way; a doorbell call's failed status after it
     * (so the trainer finds the line when it sees the status).
     */
    private void failCall(final String message) throws IOException
    {
        control.reply(Requests.error(message));
        if (callByDoorbell)
        {
            callPage.answer(CallPage.STATUS_FAILED, 0, true);
        }
    }

    private void handle(final String line) throws IOException
    {
        try
        {
            final JsonNode request = Requests.parse(line);
            final String opName = request.get("op").textValue();
            switch (opName)
            {
                case "open" ->
                {
                    final ObjectNode reply = open(request, Requests.ok());
                    if (request.has("doorbell"))
                    {
                        final boolean doorbell = openCallPage(Requests.longField(request, "doorbell", -1));
                        reply.put("doorbell", doorbell);
                        answerAtSums = doorbell && Requests.booleanField(request, "inputRelease", false);
                        reply.put("inputRelease", answerAtSums);
                    }
                    control.reply(Requests.text(reply));
                }
                case "connect" ->
                {
                    connect(request);
                    control.reply(Requests.text(Requests.ok()));
                }
                case "allreduce" ->
                {
                    callByDoorbell = false;
                    callStartNs = System.nanoTime();
                    checkCallRequest(request);
                    beginCall(Requests.longField(request, "elements", -1));
                    inCall = true;
                }
                case "stats" ->
                {
                    final ObjectNode reply = Requests.ok().put("calls", calls).put("failedCalls", failedCalls)
                        .put("callsFailedAfterAnswer", callsFailedAfterAnswer);
                    stats(reply);
                    control.reply(Requests.text(reply));
                }
                case "close" ->
                {
                    closing = true;
                    control.reply(Requests.text(Requests.ok()));
                }
                default -> throw new IllegalArgumentException("unknown op '" + opName + "' (open, connect, " +
                    "allreduce, stats, close)");
            }
        }
        catch (final IllegalArgumentException | IllegalStateException ex)
        {
            control.reply(Requests.error(ex.getMessage()));
        }
        catch (final CallFailedException ex)
        {
            callFailed(ex.getMessage());
        }
        catch (final IOException ex)
        {
            // the shared memory file could not be opened or mapped: the trainer's mistake, not the sidecar's end
            control.reply(Requests.error("open: shared memory: " + ex.getMessage()));
        }
    }

    /**
     * The open asked for the call doorbell at {@code offset} of the shared file: map its page when this sidecar was
     * given the trainer's eventfds ({@code worker serve --doorbell-fd --answer-fd}).
     *
     * @return whether calls may come by the doorbell (else they keep coming as JSON requests).
     */
    private boolean openCallPage(final long offset) throws IOException
    {
        final var answer = control.answerBell();
        if (answer == null)
        {
            return false;
        }
        if (offset < 0 || offset % Long.BYTES != 0 || offset > sharedFile.size() - CallPage.LENGTH)
        {
            throw new IllegalArgumentException("open: doorbell " + offset + " must be an 8-byte aligned offset " +
                "of the shared file with " + CallPage.LENGTH + " bytes behind it (the file holds " +
                sharedFile.size() + ")");
        }
        callPage = new CallPage(
            sharedFile.map(FileChannel.MapMode.READ_WRITE, offset, CallPage.LENGTH, mappings).asByteBuffer(), answer);
        return true;
    }

    /**
     * Map {@code path}, {@code bytes} long (the open request's {@code shm} and {@code shmBytes}): once per sidecar,
     * by {@link #open}, after its own checks.
     */
    final ByteBuffer mapShared(final Path path, final long bytes) throws IOException
    {
        if (sharedFile != null)
        {
            throw new IllegalStateException("open: the shared memory is already mapped");
        }
        if (bytes <= 0 || bytes > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("open: shmBytes must be 1.." + Integer.MAX_VALUE + ": " + bytes);
        }
        if (!Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS))
        {
            throw new IllegalArgumentException("open: shm " + path + " is not a regular file");
        }
        if (Files.size(path) < bytes)
        {
            throw new IllegalArgumentException("open: shm " + path + " holds " + Files.size(path) +
                " bytes, fewer than shmBytes " + bytes);
        }
        sharedFile = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE);
        return sharedFile.map(FileChannel.MapMode.READ_WRITE, 0, bytes, mappings).asByteBuffer();
    }
}
