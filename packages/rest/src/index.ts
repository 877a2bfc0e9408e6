export { DecodeError, decodeObject, decodeParams } from './decode.ts';
export {
  enumValueName,
  type FieldFlags,
  fieldFlags,
  isInternal,
  isListResponse,
  type Json,
  type JsonObject,
  objectName,
  render,
  renderList,
} from './render.ts';
