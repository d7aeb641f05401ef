package shard

// Slot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag (Tag), modulo 16384, as Redis computes it.
func Slot(key string) int {
	var crc uint16
	for _, c := range []byte(Tag(key)) {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}
