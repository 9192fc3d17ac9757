CREATE TABLE `cronq_console_sign_outs` (
	`session_hash` char(64) NOT NULL,
	`expires_at` datetime(6) NOT NULL,
	CONSTRAINT `cronq_console_sign_outs_session_hash` PRIMARY KEY(`session_hash`)
);
--> statement-breakpoint
CREATE INDEX `cronq_console_sign_outs_expiry` ON `cronq_console_sign_outs` (`expires_at`);