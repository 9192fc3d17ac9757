import mysql from 'mysql2/promise';

/** True when a MySQL/MariaDB server at `url` accepts a connection within `timeoutMs`. */
export async function answers(url: string, timeoutMs = 2_000): Promise<boolean> {
  try {
    const conn = await mysql.createConnection({ uri: url, connectTimeout: timeoutMs });
    await conn.end();
    return true;
  } catch {
    return false;
  }
}
