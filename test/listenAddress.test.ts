import { describe, expect, it } from 'vitest';
import { isLoopback, listenAddress, urlHost } from '../settings/listenAddress.js';

describe('a listen address', () => {
  it('opens a socket on the host and port of an IPv4 address or a name', () => {
    expect(listenAddress('127.0.0.1:7443')).toEqual({ host: '127.0.0.1', port: 7443 });
    expect(listenAddress('0.0.0.0:0')).toEqual({ host: '0.0.0.0', port: 0 });
    expect(listenAddress('localhost:8080')).toEqual({ host: 'localhost', port: 8080 });
  });

  it('takes an IPv6 host out of its brackets for the socket and puts it back for a URL', () => {
    expect(listenAddress('[::1]:7443')).toEqual({ host: '::1', port: 7443 });
    expect(listenAddress('[fe80::1:2]:65535')).toEqual({ host: 'fe80::1:2', port: 65535 });
    expect(urlHost('::1')).toBe('[::1]');
    expect(urlHost('127.0.0.1')).toBe('127.0.0.1');
  });

  it('is reached on loopback when it listens on every interface', () => {
    expect(urlHost('0.0.0.0')).toBe('127.0.0.1');
    expect(urlHost('::')).toBe('[::1]');
  });

  it('knows which hosts only this machine reaches', () => {
    for (const address of ['127.0.0.1:8080', '127.1.2.3:8080', 'localhost:8080', '[::1]:8080']) {
      expect(isLoopback(listenAddress(address).host)).toBe(true);
    }
    for (const address of ['0.0.0.0:8080', '[::]:8080', '10.0.0.5:8080', 'gpu-1.internal:8080']) {
      expect(isLoopback(listenAddress(address).host)).toBe(false);
    }
  });
});
