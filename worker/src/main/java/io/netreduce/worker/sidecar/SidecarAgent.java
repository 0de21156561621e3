package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.port.Doorbell;
import io.netreduce.protocol.port.UnixFdListener;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A host's sidecars in one long-lived process ({@code netreduce worker agent}): each trainer that asks gets a
 * session, which is exactly what a {@code worker serve} sidecar would give it (its own AF_PACKET port, RC endpoint,
 * QP numbers, shared memory, call page and control socket, the same requests), run on a thread of this process. The
 * point is the JIT: a sidecar started with its trainer compiles its packet path during the trainer's first steps,
 * on the trainer's cores, every training; the agent's sessions share one JVM's compiled code, so only the host's
 * first session pays (docs/python.md, "The sidecar agent").
 * <p>
 * A trainer connects to the agent's owner-only socket and sends one line, with its call page's two eventfds
 * attached ({@code SCM_RIGHTS}), as a sidecar it starts would inherit them:
 * {@code {"op":"session","socket":PATH,"pmtu":4096,"rtoUs":400000,"firstQpn":N,"acceptTimeout":60}}. The agent
 * opens the session's control socket at PATH (in the trainer's private directory), answers
 * {@code {"ok":true,"listening":PATH,"session":K}} (or {@code {"ok":false,"error":...}}) and closes the connection;
 * from then on the trainer talks to its session as to a sidecar. A session ends as a sidecar would: at
 * {@code close} or when the trainer goes away; its port, endpoint, mapping and eventfds are released then.
 * <p>
 * Only the agent's own user and root may start a session ({@code SO_PEERCRED}): a session's ring carries the
 * trainer's gradients, and its QP numbers and addresses are the host's. Run it as the trainers' user (the session's
 * control socket and shared memory are made owner-only by the agent and the trainer; root reaches both).
 */
public final class SidecarAgent
{
    /** Longest session request line. */
    static final int MAX_REQUEST = 4096;
    /** Longest a connection may take to send its request (a trainer sends it at once). */
    static final long REQUEST_TIMEOUT_MS = 10_000;
    /** Eventfds a session request carries: none (calls as JSON lines) or the doorbell and the answer bell. */
    static final int BELLS = 2;

    /**
     * What a session needs that the agent provides: its port and endpoint, made for each session.
     */
    @FunctionalInterface
    public interface EndpointFactory
    {
        /**
         * @return a new endpoint on a new port, which the caller closes (closing the endpoint closes its port).
         */
        RcEndpoint open(RcConfig config) throws IOException;
    }

    /**
     * A session's request, checked.
     *
     * @param socket        the control socket to listen on.
     * @param rc            the endpoint's configuration (PMTU, RTO, first QP number).
     * @param acceptTimeout seconds to wait for the trainer to connect to {@code socket}.
     */
    record SessionRequest(Path socket, RcConfig rc, int acceptTimeout)
    {
    }

    private final UnixFdListener door;
    private final EndpointFactory endpoints;
    private final int maxSessions;
    private final long firstWarmUpFrames;
    private final PrintStream log;
    private final SessionStart sessionStart;
    private final AtomicInteger active = new AtomicInteger();
    private final AtomicLong sessions = new AtomicLong();
    private final int ownUid;
    private volatile long requestTimeoutMs = REQUEST_TIMEOUT_MS;

    /**
     * Run for each session on its own thread once its endpoint exists (the command sets the thread's nice value).
     */
    @FunctionalInterface
    public interface SessionStart
    {
        void started(long session);
    }

    /**
     * @param door              the agent's socket, already listening.
     * @param endpoints         makes each session's port and endpoint.
     * @param maxSessions       sessions at once; a request beyond is refused.
     * @param firstWarmUpFrames the in-memory warm-up ({@code worker serve --warm-up-frames}) of the first session
     *                          only: later sessions find the packet path compiled.
     * @param sessionStart      run on each session's thread before it serves.
     * @param log               where sessions' starts, ends and refusals are told.
     */
    public SidecarAgent(final UnixFdListener door, final EndpointFactory endpoints, final int maxSessions,
        final long firstWarmUpFrames, final SessionStart sessionStart, final PrintStream log) throws IOException
    {
        this.door = door;
        this.endpoints = endpoints;
        this.maxSessions = maxSessions;
        this.firstWarmUpFrames = firstWarmUpFrames;
        this.sessionStart = sessionStart;
        this.log = log;
        this.ownUid = (Integer)Files.getAttribute(door.path(), "unix:uid");
    }

    /**
     * Tests: a shorter wait for a connection's request than {@link #REQUEST_TIMEOUT_MS}.
     */
    void requestTimeoutMs(final long millis)
    {
        requestTimeoutMs = millis;
    }

    /**
     * @return sessions started so far.
     */
    public long sessions()
    {
        return sessions.get();
    }

    /**
     * @return sessions running now.
     */
    public int activeSessions()
    {
        return active.get();
    }

    /**
     * Accept session requests until the door is closed; each session runs on a thread of its own.
     */
    public void run()
    {
        while (true)
        {
            final UnixFdListener.Connection connection;
            try
            {
                connection = door.accept();
            }
            catch (final IOException ex)
            {
                log.println("agent: " + ex.getMessage());
                return;
            }
            Thread.ofPlatform().name("agent-request").start(() -> request(connection));
        }
    }

    private void request(final UnixFdListener.Connection connection)
    {
        int[] bells = new int[0];
        try
        {
            // who it is first: nothing of a stranger's is read (descriptors it sent go with the connection)
            final int uid = connection.peerUid();
            if (uid != ownUid && uid != 0)
            {
                throw new IllegalArgumentException("user " + uid + " may not start sessions of this agent (user " +
                    ownUid + ")");
            }
            final UnixFdListener.Line line = connection.readLine(MAX_REQUEST, requestTimeoutMs);
            bells = line.fds();
            final SessionRequest request = parse(line.text(), bells.length);
            if (active.incrementAndGet() > maxSessions)
            {
                active.decrementAndGet();
                throw new IllegalArgumentException("the agent runs " + maxSessions + " sessions already (" +
                    "--max-sessions)");
            }
            final long session = sessions.incrementAndGet();
            final int[] taken = bells;
            bells = new int[0];
            // The session owns the eventfds from here, and the connection is answered once its socket is there.
            serve(session, request, taken, connection);
        }
        catch (final IOException | RuntimeException ex)
        {
            UnixFdListener.Connection.closeAll(bells);
            final String why = ex.getMessage() == null ? ex.toString() : ex.getMessage();
            log.println("agent: refused a session: " + why);
            try
            {
                connection.write(answer(false, why, null, 0) + "\n");
            }
            catch (final IOException ignored)
            {
                // the trainer has gone; nothing to tell
            }
        }
        finally
        {
            connection.close(); // already closed once a session answered
        }
    }

    private void serve(final long session, final SessionRequest request, final int[] bells,
        final UnixFdListener.Connection connection) throws IOException
    {
        final boolean[] answered = { false };
        final Doorbell doorbell;
        final Doorbell answer;
        try
        {
            doorbell = bells.length == BELLS ? Doorbell.adopt(bells[0]) : new Doorbell();
        }
        catch (final RuntimeException ex)
        {
            active.decrementAndGet();
            UnixFdListener.Connection.closeAll(bells);
            throw ex;
        }
        try
        {
            answer = bells.length == BELLS ? Doorbell.adopt(bells[1]) : null;
        }
        catch (final RuntimeException ex)
        {
            active.decrementAndGet();
            doorbell.close();
            UnixFdListener.Connection.closeAll(new int[]{ bells[1] });
            throw ex;
        }
        String ended;
        try (doorbell; answer; RcEndpoint endpoint = endpoints.open(request.rc()))
        {
            sessionStart.started(session);
            final long warmUp = session == 1 ? firstWarmUpFrames : 0;
            log.println("agent: session " + session + " on " + request.socket() + " (first QP " +
                request.rc().firstQpn() + ", " + active.get() + " running)");
            final int status = SidecarRunner.run(endpoint, doorbell, answer, request.socket(), request.acceptTimeout(),
                warmUp, socket ->
                {
                    connection.write(answer(true, null, socket, session) + "\n");
                    answered[0] = true;
                    connection.close();
                });
            ended = status == 0 ? "ended" : "ended (no trainer came)";
        }
        catch (final IOException | RuntimeException ex)
        {
            if (!answered[0])
            {
                throw ex;
            }
            ended = "failed: " + ex.getMessage();
        }
        finally
        {
            active.decrementAndGet();
        }
        // told once the session's port, endpoint and eventfds are released and it no longer counts as running
        log.println("agent: session " + session + " " + ended);
    }

    /**
     * @throws IllegalArgumentException if the line is not a session request this agent can serve.
     */
    static SessionRequest parse(final String line, final int bells)
    {
        final JsonNode request = Requests.parse(line);
        if (!"session".equals(request.path("op").asText()))
        {
            throw new IllegalArgumentException("the agent takes one request, {\"op\":\"session\",...}: got \"" +
                request.path("op").asText() + "\"");
        }
        if (bells != 0 && bells != BELLS)
        {
            throw new IllegalArgumentException("a session request carries no descriptor or two eventfds (the call " +
                "doorbell and the answer bell): got " + bells);
        }
        final String socket = Requests.textField(request, "socket", null);
        if (socket == null || !Path.of(socket).isAbsolute())
        {
            throw new IllegalArgumentException("\"socket\" must be an absolute path");
        }
        final RcConfig rc = new RcConfig()
            .pmtu((int)Requests.longField(request, "pmtu", 4096))
            .retransmitTimeoutNs(Requests.longField(request, "rtoUs", 400_000) * 1000)
            .firstQpn((int)Requests.longField(request, "firstQpn", 0x11));
        final long acceptTimeout = Requests.longField(request, "acceptTimeout", 60);
        if (acceptTimeout < 1 || acceptTimeout > 3600)
        {
            throw new IllegalArgumentException("\"acceptTimeout\" must be 1..3600 seconds: " + acceptTimeout);
        }
        return new SessionRequest(Path.of(socket), rc, (int)acceptTimeout);
    }

    static String answer(final boolean ok, final String error, final Path socket, final long session)
    {
        final ObjectNode node = JsonNodeFactory.instance.objectNode();
        node.put("ok", ok);
        if (error != null)
        {
            node.put("error", error);
        }
        if (socket != null)
        {
            node.put("listening", socket.toString());
            node.put("session", session);
        }
        return node.toString();
    }
}
