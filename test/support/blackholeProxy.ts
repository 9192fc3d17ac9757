import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a database server that can turn into a black hole: it keeps
 * every socket open (and accepts new ones) but stops forwarding, like a network that
 * silently drops packets. `urlFor(url)` is `url` pointed at the proxy.
 */
export class BlackholeProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  blackhole = false;
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.server = createServer((client) => {
      const upstream = tcpConnect(target.port, target.host);
      this.sockets.add(client).add(upstream);
      client.on('data', (d) => this.blackhole || upstream.write(d));
      upstream.on('data', (d) => this.blackhole || client.write(d));
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
  }

  /** A proxy in front of the server `url` names, listening. */
  static async before(url: string): Promise<BlackholeProxy> {
    const parsed = new URL(url);
    const proxy = new BlackholeProxy({ host: parsed.hostname, port: Number(parsed.port || 3306) });
    await proxy.listen();
    return proxy;
  }

  /** `url` (a mysql:// URL to the proxied server) pointed at this proxy instead. */
  urlFor(url: string): string {
    const parsed = new URL(url);
    parsed.host = `127.0.0.1:${this.port}`;
    return parsed.toString();
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
